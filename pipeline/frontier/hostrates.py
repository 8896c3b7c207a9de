"""Per-host change-rate estimates of the Poisson policy (issue #23), one rule for both scales. Pure.

Under ``recrawl.policy = "poisson"`` a URL's next fetch depends on its host's marginal value ``mu``
(``schedule.optimal_interval``), solved so that the intervals of the host's URLs spend its fetch budget
(``schedule.solve_mu``). What that solve needs is a histogram of the host's URLs by estimated change rate:
``HostRates`` keeps it as counts per log bucket of the rate (1/8 of e: 13 %), URLs not estimated yet under
the key ``None`` (they count at the prior rate, 1 / ``initial_interval_s``, so a host of new URLs solves to
the uniform interval), with the host's current ``mu`` and the result time it was solved at.

``plan`` is the one function both scales call per fetch result: the host's ``mu`` (solved again when the
histogram changed and ``MU_EVERY_S`` of result time passed), ``Schedule.plan`` with it, then the URL moves
from the bucket its previous state was counted in (``key_of(prev)``) to its new state's. Because a URL's
old bucket is a function of its stored ``Revisit``, the counts need no per-URL memory: the embedded crawl
keeps ``HostRates`` in memory (``pipeline.crawl.revisits``), the fleet's crawl-db update job in the crawl
db (``jobs/recrawl.py``: HBase counters on the meta table, so concurrent map tasks add, not overwrite), and
the same history gives the same next fetch on both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pipeline.frontier.changerate import revisit_rate
from pipeline.frontier.schedule import Change, Observation, Schedule, solve_mu
from pipeline.storage.base import Revisit

MU_EVERY_S = 2.0  # a host's mu is solved again at most this often (result time)
_BUCKETS_PER_E = 8  # rates in log buckets of 1/8 (13 %): a host's solve costs O(buckets), not O(URLs)

Key = int | None  # a rate bucket, or None: not estimated yet (counts at the prior rate)


def rate_bucket(rate: float) -> int:
    return round(math.log(rate) * _BUCKETS_PER_E)


def bucket_rate(bucket: int) -> float:
    return math.exp(bucket / _BUCKETS_PER_E)


def counted(prev: Revisit | None) -> bool:
    """Whether ``prev`` is in its host's histogram: every state a successful Poisson plan wrote is (a URL
    whose fetches all failed has ``fetches == 0`` and is not)."""
    return prev is not None and prev.fetches >= 1


def key_of(rv: Revisit, schedule: Schedule) -> Key:
    """The histogram key of a Poisson-policy state: its rate's bucket once ``min_observations`` windows
    are seen and the rate is positive, else None (the prior)."""
    rate = revisit_rate(rv, schedule.prior_rate)
    return rate_bucket(rate) if rv.fetches - 1 >= schedule.cfg.min_observations and rate > 0 else None


def encode_key(key: Key) -> str:
    """A key as text (``"p"`` for the prior): the form the fleet stores (HBase column, JSON key)."""
    return "p" if key is None else str(key)


def decode_key(text: str) -> Key | str:
    """``encode_key``'s inverse; text that is neither (a corrupt cell) comes back as the text itself."""
    if text == "p":
        return None
    try:
        return int(text)
    except ValueError:
        return text


@dataclass(slots=True)
class HostRates:
    """One host's histogram (key -> URLs), its ``mu`` (None: the schedule's default) and solve state."""

    counts: dict[Key, int] = field(default_factory=dict)
    mu: float | None = None
    solved_at: float = -math.inf
    dirty: bool = False

    def histogram(self, prior_rate: float) -> list[tuple[float, int]]:
        """((rate, URLs), ...) for ``solve_mu``; URLs not estimated count at ``prior_rate``."""
        out: dict[int, int] = {}
        prior = rate_bucket(prior_rate)
        for key, n in self.counts.items():
            if n > 0:
                b = prior if key is None else key
                out[b] = out.get(b, 0) + n
        return [(bucket_rate(b), n) for b, n in out.items()]

    def shift(self, old: Key, new: Key, *, was_counted: bool) -> None:
        """A URL moves from ``old`` (when ``was_counted``) to ``new``. A count never goes below 0 (an
        embedded crawl resumed with an empty histogram meets URLs it has not counted yet). Marks the host
        for a new solve even when the key stays, so the solve keeps its ``MU_EVERY_S`` cadence while
        results arrive (a solve of an unchanged histogram gives the same mu)."""
        self.dirty = True
        if was_counted and old == new:
            return
        if was_counted and self.counts.get(old, 0) > 0:
            self.counts[old] -= 1
            if not self.counts[old]:
                del self.counts[old]
        self.counts[new] = self.counts.get(new, 0) + 1

    def current_mu(self, now: float, *, budget_rps: float, schedule: Schedule) -> float | None:
        """The host's ``mu`` at result time ``now``: solved from the histogram so that the intervals spend
        ``budget_rps`` (0: what revisiting each of the host's URLs every ``initial_interval_s`` would
        spend, so the policy spends uniform revisiting's fetches, better), again when the histogram
        changed and ``MU_EVERY_S`` passed."""
        if self.dirty and now - self.solved_at >= MU_EVERY_S:
            cfg = schedule.cfg
            hist = self.histogram(schedule.prior_rate)
            budget = budget_rps if budget_rps > 0 else sum(n for _, n in hist) / cfg.initial_interval_s
            self.mu = solve_mu(hist, budget, low=cfg.min_interval_s, high=cfg.max_interval_s)
            self.solved_at, self.dirty = now, False
        return self.mu


def plan(
    schedule: Schedule,
    rates: HostRates,
    prev: Revisit | None,
    obs: Observation,
    *,
    url: str,
    host: str,
    budget_rps: float,
) -> tuple[Change, Revisit]:
    """``Schedule.plan`` with the host's ``mu`` under the Poisson policy, updating ``rates``; the Nutch
    policy (or uniform revisiting) plans as ``Schedule.plan`` alone and leaves ``rates`` as it was."""
    if not schedule.poisson:
        return schedule.plan(prev, obs, url=url, host=host)
    mu = rates.current_mu(obs.fetched_at, budget_rps=budget_rps, schedule=schedule)
    change, revisit = schedule.plan(prev, obs, url=url, host=host, mu=mu)
    if change is not Change.FAILED:
        old = key_of(prev, schedule) if prev is not None else None
        rates.shift(old, key_of(revisit, schedule), was_counted=counted(prev))
    return change, revisit
