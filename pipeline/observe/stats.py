"""Live crawl statistics, shared by the embedded crawl and the fleet dispatcher.

The engine calls ``on_result`` for every FetchResult (about 2,000 calls a second on one core), so
that path does a few integer increments and dict updates and allocates nothing else: latencies go
into fixed log-spaced histogram buckets (``bisect`` over a constant tuple), never lists of samples.

``tick()`` turns the counters into one row for ``stats.jsonl`` at most once per wall second.
Key meaning of a row (all counts are integers):

* **per-interval deltas** (what happened since the previous row; divide by ``dt`` for a rate):
  ``pages`` (results with an HTTP response), ``failed`` (results with an ``error_class``),
  ``bytes`` (wire bytes, falling back to body bytes when the fetcher did not measure the wire),
  ``errors`` {error_class: n}, ``status`` {code: n} (string keys, JSON-friendly),
  ``discovered``, ``robots_blocked``, ``quota_refusals``, and ``dns_hit_rate`` (hits /
  lookups over the interval from the ``dns`` counters; ``None`` when there were no lookups).
* **gauges** (the value at ``t``): ``queue``, ``fetchers`` {fetcher_id: {n_i, t_i, live, p, q, ...}}.
* **cumulative totals** (since the start): ``dns`` (the resolver's own counters, passed through
  as last set) and ``totals`` {pages, failed, bytes, discovered, robots_blocked, quota_refusals}.
* ``t`` is the clock value of the row, ``dt`` the seconds the deltas cover (> 0).

Not thread-safe: call it from one thread (the crawl's event loop). Readers in the same loop
(progress bar, /metrics) use the read-only properties and ``snapshot``-style methods.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from fetchers.records import FetchResult
from pipeline.urls import host_of

log = logging.getLogger(__name__)

# Upper bounds (seconds) of the latency buckets: 0.1 ms .. ~100 s, four per decade. The last bucket
# (index len(LATENCY_BOUNDS_S)) holds everything slower.
LATENCY_BOUNDS_S: tuple[float, ...] = tuple(round(10 ** (e / 4), 6) for e in range(-16, 9))
LATENCY_PHASES: tuple[str, ...] = ("dns", "connect", "ttfb", "total")
_DNS_HIT_KEYS = ("hits", "negative_hits", "inflight_joins")
_DNS_LOOKUP_KEYS = ("hits", "misses", "negative_hits", "inflight_joins")
TOP_HOSTS = 20


class CrawlStats:
    """Counters for one crawl. See the module docstring for the meaning of ``tick`` rows."""

    __slots__ = (
        "_clock",
        "_start",
        "_last_t",
        "_last_second",
        "_pages",
        "_failed",
        "_bytes",
        "_discovered",
        "_robots_loads",
        "_robots",
        "_parse_failed",
        "_quota_total",
        "_errors",
        "_status",
        "_quota",
        "_depth",
        "_host_pages",
        "_host_errors",
        "_fetcher_pages",
        "_lat",
        "_lat_sum",
        "_queue",
        "_fetchers",
        "_dns",
        "_quota_per_s",
        "_prev",
        "_prev_errors",
        "_prev_status",
        "_prev_dns",
    )

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._start = clock()
        self._last_t = self._start
        self._last_second = int(self._start)
        self._pages = 0
        self._failed = 0
        self._bytes = 0
        self._discovered = 0
        self._robots = 0
        self._parse_failed = 0
        self._quota_total = 0
        self._errors: dict[str, int] = {}
        self._status: dict[int, int] = {}
        self._quota: dict[tuple[str, str], int] = {}
        self._depth: dict[int, int] = {}
        self._host_pages: dict[str, int] = {}
        self._host_errors: dict[str, int] = {}
        self._fetcher_pages: dict[str, int] = {}
        n_buckets = len(LATENCY_BOUNDS_S) + 1
        self._lat: tuple[list[int], ...] = tuple([0] * n_buckets for _ in LATENCY_PHASES)
        self._lat_sum = [0.0] * len(LATENCY_PHASES)  # for the Prometheus histogram's _sum
        self._queue = 0
        self._fetchers: dict[str, dict[str, float]] = {}
        self._dns: dict[str, int] = {}
        # robots.txt loads the fetchers reported (FetchResult.robots): fetched, from the share, changed
        self._robots_loads = {"fetched": 0, "shared": 0, "changed": 0}
        self._quota_per_s: float | dict[str, float] | None = None
        # Counter values at the previous tick, for the per-interval deltas.
        self._prev = (0, 0, 0, 0, 0, 0)
        self._prev_errors: dict[str, int] = {}
        self._prev_status: dict[int, int] = {}
        self._prev_dns: dict[str, int] = {}

    # --- hot path ----------------------------------------------------------------------------------
    def on_result(self, result: FetchResult) -> None:
        """Count one fetch outcome. O(1), no allocation beyond dict entries for new keys."""
        host = host_of(result.url)
        err = result.error_class
        if err:
            self._failed += 1
            self._errors[err] = self._errors.get(err, 0) + 1
            self._host_errors[host] = self._host_errors.get(host, 0) + 1
        else:
            self._pages += 1
            self._host_pages[host] = self._host_pages.get(host, 0) + 1
        if result.status:
            self._status[result.status] = self._status.get(result.status, 0) + 1
        self._bytes += result.wire_bytes or result.body_bytes
        self._depth[result.depth] = self._depth.get(result.depth, 0) + 1
        fid = result.fetcher_id
        self._fetcher_pages[fid] = self._fetcher_pages.get(fid, 0) + 1
        for note in result.robots:
            self._robots_loads["fetched" if note.fetched else "shared"] += 1
            if note.changed:
                self._robots_loads["changed"] += 1
                log.info("robots.changed", extra={"fields": {"origin": note.origin, "changed": list(note.changed),
                                                             "crawl_delay": note.crawl_delay}})  # fmt: skip
        t = result.timings
        lat = self._lat
        sums = self._lat_sum
        bounds = LATENCY_BOUNDS_S
        # A zero phase means "not measured / not applicable" (connection reuse, cached DNS): skip it.
        if t.dns_s > 0:
            lat[0][bisect.bisect_left(bounds, t.dns_s)] += 1
            sums[0] += t.dns_s
        if t.connect_s > 0:
            lat[1][bisect.bisect_left(bounds, t.connect_s)] += 1
            sums[1] += t.connect_s
        if t.ttfb_s > 0:
            lat[2][bisect.bisect_left(bounds, t.ttfb_s)] += 1
            sums[2] += t.ttfb_s
        if t.total_s > 0:
            lat[3][bisect.bisect_left(bounds, t.total_s)] += 1
            sums[3] += t.total_s

    def on_discovered(self, n: int) -> None:
        self._discovered += n

    def on_robots_blocked(self, n: int = 1) -> None:
        self._robots += n

    def on_parse_failed(self) -> None:
        """A page kept without its links: its parse killed parser processes (``Prepared.parse_error``)."""
        self._parse_failed += 1

    def on_quota_refusal(self, service: str, reason: str) -> None:
        self._quota_total += 1
        key = (service, reason)
        self._quota[key] = self._quota.get(key, 0) + 1

    # --- gauges ------------------------------------------------------------------------------------
    def set_queue(self, n: int) -> None:
        self._queue = n

    def set_fetchers(self, fetchers: Mapping[str, Mapping[str, float]]) -> None:
        """fetcher_id -> {"n_i", "t_i", "live" (0/1), "p", "q", ...}; extra numeric keys are kept."""
        self._fetchers = {fid: dict(v) for fid, v in fetchers.items()}

    def set_dns(self, dns: Mapping[str, int]) -> None:
        """The DNS cache's cumulative counters: hits, misses, negative_hits, inflight_joins, ..."""
        self._dns = dict(dns)

    def set_quota_per_s(self, quota: float | Mapping[str, float] | None) -> None:
        """The admission quota (URLs/s, total or per service) so the report can draw the quota line."""
        self._quota_per_s = dict(quota) if isinstance(quota, Mapping) else quota

    # --- read-only views (progress bar, /metrics) --------------------------------------------------
    @property
    def pages(self) -> int:
        return self._pages

    @property
    def failed(self) -> int:
        return self._failed

    @property
    def bytes(self) -> int:
        return self._bytes

    @property
    def queue(self) -> int:
        return self._queue

    @property
    def discovered(self) -> int:
        return self._discovered

    @property
    def robots_blocked(self) -> int:
        return self._robots

    @property
    def quota_refusals(self) -> int:
        return self._quota_total

    @property
    def started_at(self) -> float:
        return self._start

    def errors_by_class(self) -> dict[str, int]:
        return dict(self._errors)

    def status_mix(self) -> dict[int, int]:
        return dict(self._status)

    def quota_refusals_by(self) -> dict[tuple[str, str], int]:
        """(service, reason) -> refusals."""
        return dict(self._quota)

    def fetchers(self) -> dict[str, dict[str, float]]:
        return {fid: dict(v) for fid, v in self._fetchers.items()}

    def fetcher_pages(self) -> dict[str, int]:
        return dict(self._fetcher_pages)

    def dns(self) -> dict[str, int]:
        return dict(self._dns)

    def latency_histograms(self) -> dict[str, list[int]]:
        """phase -> bucket counts; bucket i counts values <= LATENCY_BOUNDS_S[i] (last: the rest)."""
        return {phase: list(counts) for phase, counts in zip(LATENCY_PHASES, self._lat, strict=True)}

    def latency_sums(self) -> dict[str, float]:
        """phase -> sum of the measured seconds (with ``latency_histograms``: a mean, a Prometheus sum)."""
        return dict(zip(LATENCY_PHASES, self._lat_sum, strict=True))

    # --- once a second -----------------------------------------------------------------------------
    def tick(self) -> dict[str, Any] | None:
        """One stats.jsonl row when the wall second has changed since the last row, else None."""
        now = self._clock()
        second = int(now)
        if second <= self._last_second:
            return None
        dt = max(now - self._last_t, 1e-9)
        self._last_second = second
        self._last_t = now
        cur = (self._pages, self._failed, self._bytes, self._discovered, self._robots, self._quota_total)
        prev = self._prev
        self._prev = cur
        errors = _delta(self._errors, self._prev_errors)
        status = _delta(self._status, self._prev_status)
        self._prev_errors = dict(self._errors)
        self._prev_status = dict(self._status)
        dns_rate = _dns_hit_rate(self._dns, self._prev_dns)
        self._prev_dns = dict(self._dns)
        return {
            "t": round(now, 3),
            "dt": round(dt, 3),
            "pages": cur[0] - prev[0],
            "failed": cur[1] - prev[1],
            "bytes": cur[2] - prev[2],
            "discovered": cur[3] - prev[3],
            "robots_blocked": cur[4] - prev[4],
            "quota_refusals": cur[5] - prev[5],
            "errors": errors,
            "status": {str(k): v for k, v in status.items()},
            "dns_hit_rate": dns_rate,
            "queue": self._queue,
            "fetchers": self.fetchers(),
            "dns": dict(self._dns),
            "totals": {
                "pages": cur[0],
                "failed": cur[1],
                "bytes": cur[2],
                "discovered": cur[3],
                "robots_blocked": cur[4],
                "quota_refusals": cur[5],
            },
        }

    def summary(self) -> dict[str, Any]:
        """Totals for summary.json. ``pages_per_s`` counts pages with an HTTP response over ``elapsed_s``."""
        elapsed = max(self._clock() - self._start, 0.0)
        top = sorted(self._host_pages.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_HOSTS]
        top_err = sorted(self._host_errors.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_HOSTS]
        return {
            "pages_fetched": self._pages,
            "pages_failed": self._failed,
            "urls_discovered": self._discovered,
            "robots_blocked": self._robots,
            "parse_failed": self._parse_failed,
            "bytes": self._bytes,
            "errors_by_class": dict(sorted(self._errors.items())),
            "status_mix": {str(k): v for k, v in sorted(self._status.items())},
            "elapsed_s": round(elapsed, 3),
            "pages_per_s": round(self._pages / elapsed, 3) if elapsed > 0 else 0.0,
            "quota_refusals": self._quota_total,
            "quota_refusals_by": {f"{s}/{r}": n for (s, r), n in sorted(self._quota.items())},
            "quota_per_s": self._quota_per_s,
            "hosts": len(self._host_pages.keys() | self._host_errors.keys()),
            "top_hosts_pages": dict(top),
            "top_hosts_errors": dict(top_err),
            "depth": {str(k): v for k, v in sorted(self._depth.items())},
            "fetcher_pages": dict(sorted(self._fetcher_pages.items())),
            "latency_bounds_s": list(LATENCY_BOUNDS_S),
            "latency_hist": self.latency_histograms(),
            "dns": dict(self._dns),
            "robots_txt": dict(self._robots_loads),
        }


def _delta(cur: Mapping[Any, int], prev: Mapping[Any, int]) -> dict[Any, int]:
    out = {}
    for key, value in cur.items():
        d = value - prev.get(key, 0)
        if d:
            out[key] = d
    return out


def dns_hit_rate(dns: Mapping[str, int]) -> float | None:
    """Cumulative cache hit rate: answered without a query upstream / all lookups; None if no lookups."""
    return _dns_hit_rate(dns, {})


def _dns_hit_rate(cur: Mapping[str, int], prev: Mapping[str, int]) -> float | None:
    lookups = sum(cur.get(k, 0) - prev.get(k, 0) for k in _DNS_LOOKUP_KEYS)
    if lookups <= 0:
        return None
    hits = sum(cur.get(k, 0) - prev.get(k, 0) for k in _DNS_HIT_KEYS)
    return round(hits / lookups, 4)
