"""The freshness bench's web (#23 point 8): the living testbed with a named change mix, what an oracle
schedule could reach on it, and the conditional-GET figures from the testbed's own access log.

- ``MixedTestbed``: ``TestbedProcess(mutate=True)`` serving ``living.MIXES[mix]`` (``testbed serve
  --mutate-mix``). Everything else (ports, ready file, access log, validators, the one host in six that
  ignores them) is the testbed's, unchanged.
- ``oracle``: expected freshness of uniform revisiting and of the freshness-optimal schedule *knowing* each
  page's true mean change rate (Cho & Garcia-Molina's optimum, ``schedule.solve_mu`` per host under the same
  per-host budget). The web's changes are ticks with a quarter chance (``living``), close to Poisson: this
  is the reference a learning schedule can at best approach, not a measurement.
- ``conditional_figures``: from the access log, every re-fetch of a normal page whose bytes had not changed
  since the previous fetch of that URL (judged by the testbed's truth at both instants), and the share of
  those answered 304, overall and on the hosts that honour validators (``liverender.honours_conditional``).

May import: pipeline (bench room).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.frontier.schedule import expected_freshness, optimal_interval, solve_mu
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.liverender import honours_conditional
from pipeline.harness.testbed.livetruth import locate
from pipeline.harness.testbed.living import CONTENT_CLASSES, MEAN_S, Living, page_class, state
from pipeline.harness.testbed.model import Web

_TESTBED_CLI = "pipeline.harness.testbed.cli"


class MixedTestbed(TestbedProcess):
    """A living testbed whose pages follow change mix ``mix`` (``living.MIXES``)."""

    __test__ = False

    def __init__(self, hosts: int, pages: int, *, mix: str, **kwargs: Any) -> None:
        Living(0.0, mix=mix)  # ValueError now for an unknown mix, not from the server process
        super().__init__(hosts, pages, mutate=True, mutate_mix=mix, **kwargs)
        self.mix = mix

    def __enter__(self) -> MixedTestbed:
        self.start()
        return self


def page_rates(web: Web) -> dict[int, list[float]]:
    """Per host, each normal page's true mean content-change rate in changes per *wall* second."""
    living = web.living
    assert living is not None
    out: dict[int, list[float]] = {}
    for i in range(web.hosts):
        classes = [page_class(web.seed, i, m, mix=living.mix) for m in range(web.pages)]
        out[i] = [living.rate / MEAN_S[c] if c in CONTENT_CLASSES else 0.0 for c in classes]
    return out


def oracle(web: Web, *, host_budget_rps: float, low: float, high: float) -> dict[str, float]:
    """Expected mean freshness of uniform revisiting at the host budget, and of the optimal schedule
    knowing the true rates (intervals within ``[low, high]``), with their ratio."""
    uniform = optimal = 0.0
    n = 0
    for rates in page_rates(web).values():
        cycle = len(rates) / host_budget_rps
        mu = solve_mu([(r, 1) for r in rates if r > 0], host_budget_rps, low=low, high=high)
        for r in rates:
            uniform += expected_freshness(r, cycle)
            optimal += expected_freshness(r, min(max(optimal_interval(r, mu), low), high)) if r > 0 else 1.0
            n += 1
    u, o = uniform / max(n, 1), optimal / max(n, 1)
    return {"uniform": round(u, 4), "optimal": round(o, 4), "ratio": round(o / u, 3) if u else 0.0}


def conditional_figures(
    web: Web, log: Iterable[Mapping[str, Any]], *, since: float, until: float
) -> dict[str, Any]:
    """304 share of byte-unchanged re-fetches in ``[since, until]`` (wall s), overall and on the hosts that
    honour validators; a re-fetch's bytes are unchanged when the page's state (content and cosmetic
    version) is the same at its fetch and at the previous fetch of the same URL."""
    living = web.living
    assert living is not None
    last: dict[str, float] = {}
    counts = {"honouring": [0, 0], "ignoring": [0, 0]}  # [byte-unchanged re-fetches, of which 304]
    for e in sorted(log, key=lambda e: float(e["t"])):
        status = int(e["status"])
        if status not in (200, 304):
            continue
        url = f"http://{e['host']}:{web.port}{e['path']}"
        where = locate(web, url)
        if where is None:
            continue
        t = float(e["t"])
        prev, last[url] = last.get(url), t
        if prev is None or not since <= t <= until:
            continue
        i, m = where
        a = state(web.seed, i, m, living.test_time(prev), mix=living.mix)
        b = state(web.seed, i, m, living.test_time(t), mix=living.mix)
        if (a.version, a.cosmetic) != (b.version, b.cosmetic):
            continue
        group = counts["honouring" if honours_conditional(i) else "ignoring"]
        group[0] += 1
        group[1] += status == 304
    h, g = counts["honouring"], counts["ignoring"]
    both = [h[0] + g[0], h[1] + g[1]]
    return {
        "byte_unchanged_refetches": both[0],
        "share_304_all_hosts": round(both[1] / both[0], 4) if both[0] else None,
        "share_304_honouring_hosts": round(h[1] / h[0], 4) if h[0] else None,
        "byte_unchanged_refetches_honouring_hosts": h[0],
        "status_304": both[1],
    }
