"""What the living web's truth says of a collection (the freshness bench): freshness and age of stored
copies at an instant, and what a periodic schedule (uniform revisiting, the oracle) keeps over a window,
computed from each page's real change times (``living.content_changes``), not from a formula.

Cho & Garcia-Molina's two metrics ("Synchronizing a database to improve freshness", SIGMOD 2000):

- **freshness** of a copy at t: 1 when it holds the live content version, else 0;
- **age** of a copy at t: 0 when fresh, else how long ago the live page first changed away from the
  copy's version (t minus the first content change after the copy was taken).

A page refreshed every I seconds at a random phase was last fetched a uniform U in [0, I) ago, so at t its
expected freshness is ``min(t - c(t), I) / I`` (c(t): the last change at or before t) and its expected age
``(1/I) * sum over changes c_j in (t - I, t] of (t - c_j) * (c_j - max(c_{j-1}, t - I))``. Averaged over a
grid of instants in the window, for every page: uniform revisiting (every page every N / budget seconds)
and the **oracle**, the freshness-optimal schedule that knows every page's true mean change rate (Cho &
Garcia-Molina's optimum: ``schedule.solve_mu`` per host under the same per-host budget, intervals within the
bench's bounds; a page whose content never changes is never fetched and always fresh). Both are expected
values on the realised change times of the run's own window, so a run's measured figures and its oracle
see the same changes.

May import: pipeline (bench room).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from pipeline.frontier.schedule import optimal_interval, solve_mu
from pipeline.harness.testbed.livetruth import locate
from pipeline.harness.testbed.living import CONTENT_CLASSES, MEAN_S, content_changes, next_change, page_class
from pipeline.harness.testbed.model import Web

GRID_S = 0.5  # the window's instants for the periodic figures


@dataclass(frozen=True, slots=True)
class Copy:
    """A stored copy: its URL and the wall time from which it holds the page's content (for the bench's
    figure: when its body was fetched; ``freshrun._copies``)."""

    url: str
    fetched_at: float


@dataclass(slots=True)
class Sample:
    """One instant's collection: stored normal pages, how many fresh, summed age (wall s); the same among
    pages whose content changes (``living.CONTENT_CLASSES``)."""

    stored: int = 0
    fresh: int = 0
    age_s: float = 0.0
    changing: int = 0
    fresh_changing: int = 0


def sample(web: Web, copies: Iterable[Copy], wall: float) -> Sample:
    """Freshness and age of ``copies`` at wall time ``wall`` (URLs that are not normal pages are left out)."""
    living = web.living
    assert living is not None
    t_now = living.test_time(wall)
    out = Sample()
    for c in copies:
        where = locate(web, c.url)
        if where is None:
            continue  # robots.txt, sitemaps, sitemap-only leaves: not part of the measured collection
        i, m = where
        went_stale = next_change(web.seed, i, m, living.test_time(c.fetched_at), mix=living.mix)
        fresh = went_stale > t_now
        out.stored += 1
        out.fresh += fresh
        if not fresh:
            out.age_s += max(0.0, wall - living.wall_time(went_stale))
        if page_class(web.seed, i, m, mix=living.mix) in CONTENT_CLASSES:
            out.changing += 1
            out.fresh_changing += fresh
    return out


def page_rates(web: Web) -> dict[int, list[float]]:
    """Per host, each normal page's true mean content-change rate in changes per *wall* second."""
    living = web.living
    assert living is not None
    out: dict[int, list[float]] = {}
    for i in range(web.hosts):
        classes = [page_class(web.seed, i, m, mix=living.mix) for m in range(web.pages)]
        out[i] = [living.rate / MEAN_S[c] if c in CONTENT_CLASSES else 0.0 for c in classes]
    return out


def wall_changes(web: Web, i: int, m: int, since: float, until: float) -> np.ndarray:
    """Wall times of page m of host i's content changes in ``(since, until]``."""
    living = web.living
    assert living is not None
    t0, t1 = living.test_time(since), living.test_time(until)
    return np.array([living.wall_time(t) for t in content_changes(web.seed, i, m, t0, t1, mix=living.mix)])


def periodic(changes: np.ndarray, interval: float, grid: np.ndarray) -> tuple[float, float]:
    """Mean freshness and mean age (s) over ``grid`` of a copy refreshed every ``interval`` s at a random
    phase, for a page whose content changed at ``changes`` (sorted wall times, covering ``interval``
    before the grid's first instant)."""
    if changes.size == 0:
        return 1.0, 0.0
    hi = np.searchsorted(changes, grid, side="right")  # changes at or before t: changes[:hi]
    last = np.where(hi > 0, changes[np.maximum(hi - 1, 0)], -np.inf)
    fresh = np.minimum(grid - last, interval) / interval
    lo = np.searchsorted(changes, grid - interval, side="right")  # first change in (t - I, t]
    # sum_{j=lo+1}^{hi-1} (t - c_j)(c_j - c_{j-1}) = t * (c_{hi-1} - c_lo) - (S[hi-1] - S[lo]),
    # S[j] = sum_{k<=j} c_k (c_k - c_{k-1}); plus the first change's term (t - c_lo)(c_lo - (t - I)).
    steps = np.diff(changes, prepend=changes[0])
    prefix = np.cumsum(changes * steps)
    has = hi > lo
    lo_c = changes[np.minimum(lo, changes.size - 1)]
    top = np.maximum(hi - 1, 0)
    inner = grid * (changes[top] - lo_c) - (prefix[top] - prefix[np.minimum(lo, changes.size - 1)])
    first = (grid - lo_c) * (lo_c - (grid - interval))
    age = np.where(has, (inner + first) / interval, 0.0)
    return float(fresh.mean()), float(age.mean())


def oracle(
    web: Web, *, host_budget_rps: float, low: float, high: float, since: float, until: float
) -> dict[str, object]:
    """Expected mean freshness and age over wall ``[since, until]`` of uniform revisiting at the host
    budget and of the oracle schedule (module docstring), with their ratios."""
    grid = np.arange(since, until, GRID_S)
    sums = {"uniform": [0.0, 0.0], "optimal": [0.0, 0.0]}
    n = 0
    for i, rates in page_rates(web).items():
        cycle = len(rates) / host_budget_rps
        mu = solve_mu([(r, 1) for r in rates if r > 0], host_budget_rps, low=low, high=high)
        for m, r in enumerate(rates):
            n += 1
            if r <= 0:
                for s in sums.values():
                    s[0] += 1.0
                continue
            best = min(max(optimal_interval(r, mu), low), high)
            changes = wall_changes(web, i, m, since - max(cycle, best, high), until)
            for name, interval in (("uniform", cycle), ("optimal", best)):
                f, a = periodic(changes, interval, grid)
                sums[name][0] += f
                sums[name][1] += a
    u_f, u_a = sums["uniform"][0] / max(n, 1), sums["uniform"][1] / max(n, 1)
    o_f, o_a = sums["optimal"][0] / max(n, 1), sums["optimal"][1] / max(n, 1)
    return {
        "uniform": {"freshness": round(u_f, 4), "age_s": round(u_a, 3)},
        "optimal": {"freshness": round(o_f, 4), "age_s": round(o_a, 3)},
        "freshness_ratio": round(o_f / u_f, 4) if u_f else None,
        "age_ratio": round(o_a / u_a, 4) if u_a else None,
    }


def gain_share(adaptive: float, uniform: float, best: float) -> float | None:
    """(adaptive - uniform) / (best - uniform): the share of the attainable gain over uniform revisiting
    (for age, lower is better and the same formula holds with the signs of both differences flipped)."""
    span = best - uniform
    if not span or math.isnan(span):
        return None
    return round((adaptive - uniform) / span, 4)
