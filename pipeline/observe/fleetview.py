"""What the dispatcher's live views read of its snapshot, and one row per fetcher built from it.

``FleetView`` and ``FetcherView`` are the only attributes of ``Dispatcher.snapshot()``
(``pipeline.dispatch.protocols.DispatcherStats``) that ``/metrics`` and ``/status`` read, plus
``last_seen`` (heartbeat time) per fetcher when it exists; a ``FleetSource`` returns the latest one.
``fetcher_rows`` turns a snapshot into one dict per fetcher (sorted by id); without a snapshot, the
fetchers come from ``CrawlStats.set_fetchers`` and the fields only a snapshot has are None. Pure.

May import: this room (observe).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pipeline.observe.stats import CrawlStats


class FetcherView(Protocol):
    """The per-fetcher fields read from the dispatcher snapshot (``FetcherStats``)."""

    fetcher_id: str
    address: str
    n: int
    t: float | None
    live: bool
    p: float
    q: int
    r: int
    outstanding: int
    successes: int
    failures: int
    deaths: int


class FleetView(Protocol):
    """The fleet-wide fields read from the dispatcher snapshot (``DispatcherStats``)."""

    now: float
    in_flight: int
    in_flight_urls: int
    last_serial: int

    @property
    def fetchers(self) -> Mapping[str, FetcherView]: ...

    @property
    def refusals(self) -> Mapping[str, int]: ...

    @property
    def dropped(self) -> Mapping[str, int]: ...


FleetSource = Callable[[], FleetView]


def fetcher_rows(stats: CrawlStats, fleet: FleetView | None, now: float) -> list[dict[str, Any]]:
    """One dict per fetcher for /status: from the dispatcher snapshot if given, else ``set_fetchers``."""
    results = stats.fetcher_pages()
    rows: list[dict[str, Any]] = []
    if fleet is not None:
        for fid, f in sorted(fleet.fetchers.items()):
            seen = getattr(f, "last_seen", None)
            rows.append(
                {
                    "fetcher": fid,
                    "address": f.address,
                    "live": bool(f.live),
                    "heartbeat_age_s": None if seen is None else round(max(now - float(seen), 0.0), 1),
                    "n_i": f.n,
                    "t_i": f.t,
                    "p": f.p,
                    "q": f.q,
                    "r": f.r,
                    "batches_out": f.outstanding,
                    "successes": f.successes,
                    "failures": f.failures,
                    "deaths": f.deaths,
                    "results": results.get(fid, 0),
                }
            )
        return rows
    for fid, g in sorted(stats.fetchers().items()):
        seen = g.get("last_heartbeat")
        rows.append(
            {
                "fetcher": fid,
                "address": "",
                "live": bool(g.get("live", 1)),
                "heartbeat_age_s": None if seen is None else round(max(now - float(seen), 0.0), 1),
                "n_i": g.get("n_i"),
                "t_i": g.get("t_i"),
                "p": g.get("p"),
                "q": g.get("q"),
                "r": g.get("r"),
                "batches_out": g.get("inflight"),
                "successes": None,
                "failures": None,
                "deaths": None,
                "results": results.get(fid, 0),
            }
        )
    return rows
