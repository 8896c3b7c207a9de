"""The re-crawl schedule (issue #23): when a fetched URL is due again. Pure: functions of values; the
caller passes the fetch's time.

Adaptive, as Nutch's AdaptiveFetchSchedule: a fetch that found the page unchanged (a 304, the same
digest, or a near-identical simhash) stretches its interval by ``1 + inc_rate``; a changed one shrinks it
by ``1 - dec_rate``; the result is kept within ``[min, max]``, which a per-host or per-pattern override
may replace. With ``sync_delta``, a changed page whose change time is known (Last-Modified, a sitemap's
lastmod) is scheduled from that time rather than from the fetch: the interval is at least the time since
the change, and the next fetch comes ``sync_delta_rate`` of that time earlier. Uniform revisiting (the
freshness bench's baseline) keeps every interval at ``initial_interval_s``.

A failed fetch keeps the interval and the stored copy's validators and comes back after
``failed_interval_s``; a URL's first fetch starts at ``initial_interval_s``.

``policy = "poisson"`` (the default; ``"nutch"`` is the rule above) schedules by each page's estimated change rate instead (Cho & Garcia-Molina,
"Synchronizing a database to improve freshness", SIGMOD 2000: changes as a Poisson process per page). The
rate comes from the page's own fetch history (``pipeline.frontier.changerate``: censored exponential
windows, Last-Modified ages, the window before the first fetch, a prior). The interval is the one at which
one more fetch of that page is worth ``mu`` of expected freshness per fetch-second (``optimal_interval``):
the freshness-optimal allocation, which revisits pages changing about as often as the revisit cycle most
and *gives up* (``max`` interval) on pages changing faster than ``1/mu``, as their result that uniform
beats proportional revisiting predicts. ``mu`` is the caller's (``pipeline.crawl.revisits`` solves it per
host so that the host's fetch budget is spent: ``solve_mu``); without one, ``default_mu`` makes a page
changing once per ``initial_interval_s`` come back after about that long. In this policy
``Revisit.interval`` holds the estimator's exposure (seconds), not the scheduled interval (that is
``next_fetch - fetched_at``), and ``changes`` the windows that saw a change; until ``min_observations``
windows are seen a page is revisited every ``initial_interval_s``.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.frontier.changerate import advance, http_time, revisit_rate
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Revisit

# Store meta key: the crawl's recrawl settings (JSON), for the fleet's crawl-db update job.
RECRAWL_META = "recrawl_settings"


class Change(enum.Enum):
    NEW = "new"  # the URL's first scheduled fetch
    CHANGED = "changed"
    UNCHANGED = "unchanged"  # a 200 whose content matches the stored copy
    NOT_MODIFIED = "not_modified"  # a 304
    FAILED = "failed"  # no usable response: the stored copy stays


@dataclass(frozen=True, slots=True)
class Observation:
    """What one fetch saw. ``modified_at``: when the page last changed (epoch s) if known, else 0."""

    fetched_at: float
    status: int
    failed: bool = False
    etag: str = ""
    last_modified: str = ""
    digest: str = ""
    simhash: int = 0
    modified_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Override:
    """Bounds for URLs matching one pattern (see ``RecrawlSettings.overrides``)."""

    pattern: str
    min_s: float
    max_s: float
    _regex: re.Pattern[str] | None = None

    def matches(self, url: str, host: str) -> bool:
        if self._regex is not None:
            return self._regex.search(url) is not None
        if self.pattern.startswith("*."):
            base = self.pattern[2:]
            return host == base or host.endswith("." + base)
        return host == self.pattern


def parse_override(item: str) -> Override:
    """``PATTERN=MIN:MAX`` as an Override; ValueError says what is wrong with ``item``."""
    pattern, sep, bounds = item.rpartition("=")
    low, colon, high = bounds.partition(":")
    if not sep or not pattern or not colon:
        raise ValueError(f"recrawl override {item!r}: expected PATTERN=MIN:MAX")
    try:
        min_s, max_s = float(low), float(high)
    except ValueError:
        raise ValueError(f"recrawl override {item!r}: MIN and MAX must be numbers of seconds") from None
    if not 0 < min_s <= max_s:
        raise ValueError(f"recrawl override {item!r}: expected 0 < MIN <= MAX")
    regex = None
    if pattern.startswith("re:"):
        try:
            regex = re.compile(pattern[3:])
        except re.error as exc:
            raise ValueError(f"recrawl override {item!r}: bad regular expression ({exc})") from None
    return Override(pattern.lower() if regex is None else pattern, min_s, max_s, regex)


def classify(prev: Revisit | None, obs: Observation, *, simhash_bits: int = 0) -> Change:
    """Whether the fetch found the page changed against the stored copy ``prev``."""
    if obs.failed:
        return Change.FAILED
    if obs.status == 304:
        return Change.NOT_MODIFIED if prev is not None else Change.FAILED  # a 304 we did not ask for
    if prev is None or prev.fetches == 0 or not prev.digest:
        return Change.NEW
    if obs.digest and obs.digest == prev.digest:
        return Change.UNCHANGED
    if (
        simhash_bits
        and obs.simhash
        and prev.simhash
        and (obs.simhash ^ prev.simhash).bit_count() <= simhash_bits
    ):
        return Change.UNCHANGED
    return Change.CHANGED


POLICIES = ("nutch", "poisson")
# g(1) = 1 - 2/e: the marginal value that makes a page changing once per T come back after T.
_G1 = 1.0 - 2.0 / math.e


def _g(x: float) -> float:
    """d(freshness)/d(fetch rate) x rate, at x = rate x interval: 1 - (1 + x) e^-x (0 at 0, -> 1). Below
    1e-3 its series x^2/2 - x^3/3 + x^4/8 - x^5/30, where the closed form loses digits to cancellation."""
    if x < 1e-3:
        return x * x * (0.5 - x * (1.0 / 3.0 - x * (0.125 - x / 30.0)))
    return 1.0 - (1.0 + x) * math.exp(-x)


def optimal_interval(rate: float, mu: float) -> float:
    """The revisit interval (s) of a page changing at ``rate`` (/s) at which one more fetch per second
    gains ``mu`` in expected freshness x seconds: solves g(rate x I) = mu x rate. ``inf`` when
    ``mu x rate >= 1`` (the page changes too fast to be worth chasing) or ``rate == 0`` (never changes)."""
    y = mu * rate
    if rate <= 0 or y >= 1.0 or not math.isfinite(y):
        return math.inf
    if y <= 0:
        return 0.0
    return _g_inverse(y) / rate


def _g_inverse(y: float) -> float:
    """The x > 0 with g(x) = y, 0 < y < 1: Newton's method on g (g' = x e^-x > 0) from a close first guess
    (the series near 0; x = L + ln(1 + x), L = -ln(1 - y), for large x), kept inside a bracket that shrinks
    with every step (a bisection step when Newton's would leave it): about 4 steps."""
    if y < 0.3:
        root = math.sqrt(2.0 * y)
        x = root * (1.0 + root / 3.0)  # inverts x^2/2 - x^3/3
    else:
        tail = -math.log1p(-y)
        x = tail + math.log1p(tail + math.log1p(tail))
    lo, hi = 0.0, math.inf
    for _ in range(60):
        e = math.exp(-x)
        f = _g(x) - y
        if f < 0:
            lo = x
        else:
            hi = x
        slope = x * e
        step = x - f / slope if slope > 0 else x
        if not lo < step < hi:
            step = 0.5 * (lo + hi) if math.isfinite(hi) else 2.0 * max(x, lo, 1e-300)
        if abs(step - x) <= 1e-12 * x:
            return step
        x = step
    return x


def expected_freshness(rate: float, interval: float) -> float:
    """Mean freshness of a copy refreshed every ``interval`` s of a page changing at ``rate`` (Poisson)."""
    if rate <= 0:
        return 1.0
    if not math.isfinite(interval):
        return 0.0
    x = rate * interval
    return 1.0 if x <= 0 else -math.expm1(-x) / x


def solve_mu(
    rates: Sequence[tuple[float, int]],
    budget_per_s: float,
    *,
    low: float,
    high: float,
    fixed_per_s: float = 0.0,
) -> float:
    """The ``mu`` at which pages with these (rate, count) pairs, each revisited at ``optimal_interval``
    clamped to ``[low, high]``, need ``budget_per_s - fixed_per_s`` fetches per second (``fixed_per_s``:
    what pages not yet estimated cost). Fetch demand falls as mu grows, so this bisects log(mu); when even
    the shortest intervals do not fill the budget the smallest mu is returned (every page at ``low``), and
    when the budget is below what ``high`` intervals need, the largest."""
    spare = budget_per_s - fixed_per_s

    def demand(mu: float) -> float:
        return sum(n / min(max(optimal_interval(r, mu), low), high) for r, n in rates if n > 0)

    lo, hi = math.log(low * 1e-6), math.log(high * 1e6)
    if demand(math.exp(lo)) <= spare:
        return math.exp(lo)
    if demand(math.exp(hi)) >= spare:
        return math.exp(hi)
    for _ in range(22):  # log(mu) to ~1e-5: the budget spent to a part in 10^5
        mid = 0.5 * (lo + hi)
        if demand(math.exp(mid)) > spare:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))


class Schedule:
    """The schedule a crawl runs with, built once from its settings (overrides parsed up front)."""

    __slots__ = ("cfg", "overrides", "default_mu", "prior_rate")

    def __init__(self, cfg: RecrawlSettings) -> None:
        if not 0 < cfg.min_interval_s <= cfg.max_interval_s:
            raise ValueError("recrawl: expected 0 < min_interval_s <= max_interval_s")
        if not 0 <= cfg.dec_rate < 1:
            raise ValueError("recrawl.dec_rate: expected 0 <= dec_rate < 1")
        if cfg.policy not in POLICIES:
            raise ValueError(f"recrawl.policy: expected one of {', '.join(POLICIES)}, got {cfg.policy!r}")
        self.default_mu = _G1 * cfg.initial_interval_s
        self.prior_rate = 1.0 / cfg.initial_interval_s if cfg.initial_interval_s > 0 else 0.0
        self.cfg = cfg
        self.overrides: Sequence[Override] = tuple(parse_override(o) for o in cfg.overrides)

    def for_sitemaps(self) -> Schedule:
        """The schedule of robots.txt and sitemap files: every ``sitemap_interval_s``, whatever the pages'
        policy (one request per file brings every page's lastmod; it must not spend a host's polite budget
        on the pages' rhythm)."""
        every = self.cfg.sitemap_interval_s
        return Schedule(dataclasses.replace(self.cfg, adaptive=False, policy="nutch", initial_interval_s=every,
                                            min_interval_s=every, max_interval_s=every, overrides=()))  # fmt: skip

    def bounds(self, url: str, host: str) -> tuple[float, float]:
        """(min, max) interval for ``url``: the first matching override's, else the settings'."""
        for o in self.overrides:
            if o.matches(url, host):
                return o.min_s, o.max_s
        return self.cfg.min_interval_s, self.cfg.max_interval_s

    @property
    def poisson(self) -> bool:
        return self.cfg.adaptive and self.cfg.policy == "poisson"

    def plan(
        self, prev: Revisit | None, obs: Observation, *, url: str, host: str, mu: float | None = None
    ) -> tuple[Change, Revisit]:
        """The fetch's change class and the URL's new re-crawl state. ``mu``: the Poisson policy's marginal
        value for this URL's host (``default_mu`` when None); the Nutch policy ignores it."""
        cfg = self.cfg
        change = classify(prev, obs, simhash_bits=cfg.simhash_bits)
        low, high = self.bounds(url, host)
        if self.poisson and change is not Change.FAILED:
            return change, self._poisson(prev, obs, change, low, high, self.default_mu if mu is None else mu)
        interval = prev.interval if prev is not None and prev.interval > 0 else cfg.initial_interval_s
        ref = obs.fetched_at
        if change is Change.FAILED:
            keep = prev or Revisit(0.0, interval)
            nxt = obs.fetched_at + min(max(cfg.failed_interval_s, low), high)
            # Poisson: ``interval`` is the estimator's exposure, which a failure tells nothing about: kept
            # exactly, 0 after a single fetch included (any other value would move the URL to another
            # bucket of its host's histogram behind the histogram's back: ``hostrates.plan``).
            if self.poisson:
                kept = prev.interval if prev is not None else interval
            else:
                kept = _clamp(interval, low, high)
            return change, Revisit(
                nxt, kept, keep.etag, keep.last_modified, keep.digest, keep.simhash,
                keep.changes, keep.fetches, keep.fetched_at,
            )  # fmt: skip
        if not cfg.adaptive:
            interval = cfg.initial_interval_s
        elif change is Change.CHANGED:
            interval *= 1.0 - cfg.dec_rate
        elif change in (Change.UNCHANGED, Change.NOT_MODIFIED):
            interval *= 1.0 + cfg.inc_rate
        if cfg.adaptive and cfg.sync_delta and change in (Change.CHANGED, Change.NEW) and obs.modified_at > 0:
            delta = obs.fetched_at - obs.modified_at
            if delta > 0:
                interval = max(interval, delta) if change is Change.CHANGED else interval
                ref = obs.fetched_at - delta * cfg.sync_delta_rate
        interval = _clamp(interval, low, high)
        base = prev or Revisit(0.0, interval)
        # The stored copy is what a 200 brought (a near-duplicate too: its bytes replace the copy, so that
        # the validators always describe the stored bytes); a 304 confirms the copy and its validators.
        got_body = change is not Change.NOT_MODIFIED
        return change, Revisit(
            next_fetch=max(ref + interval, obs.fetched_at + low),
            interval=interval,
            etag=obs.etag if got_body else obs.etag or base.etag,
            last_modified=obs.last_modified if got_body else obs.last_modified or base.last_modified,
            digest=obs.digest if got_body and obs.digest else base.digest,
            simhash=obs.simhash if got_body and obs.digest else base.simhash,
            changes=base.changes + (change is Change.CHANGED),
            fetches=base.fetches + 1,
            fetched_at=obs.fetched_at,
        )

    def _poisson(
        self, prev: Revisit | None, obs: Observation, change: Change, low: float, high: float, mu: float
    ) -> Revisit:
        cfg = self.cfg
        base = prev if prev is not None and change is not Change.NEW else None
        modified = obs.modified_at
        if not modified and base is not None and change is Change.NOT_MODIFIED:
            modified = http_time(base.last_modified)  # a 304 without the header: the date did not move
        changes, exposed = advance(
            base, fetched_at=obs.fetched_at, modified_at=modified, changed=change is Change.CHANGED
        )
        got_body = change is not Change.NOT_MODIFIED
        keep = prev or Revisit(0.0, 0.0)
        state = Revisit(
            next_fetch=obs.fetched_at,
            interval=exposed,
            etag=obs.etag if got_body else obs.etag or keep.etag,
            last_modified=obs.last_modified if got_body else obs.last_modified or keep.last_modified,
            digest=obs.digest if got_body and obs.digest else keep.digest,
            simhash=obs.simhash if got_body and obs.digest else keep.simhash,
            changes=changes,
            fetches=(base.fetches if base is not None else 0) + 1,
            fetched_at=obs.fetched_at,
        )
        if state.fetches - 1 < cfg.min_observations:
            wait = cfg.initial_interval_s
        else:
            wait = optimal_interval(revisit_rate(state, self.prior_rate), mu)
        return dataclasses.replace(state, next_fetch=obs.fetched_at + _clamp(wait, low, high))

    def on_lastmod(self, prev: Revisit, lastmod: float, *, now: float) -> Revisit | None:
        """A sitemap says the page changed at ``lastmod``: due now when that is after the stored copy's
        fetch (and not already due); None when it changes nothing."""
        if lastmod <= prev.fetched_at or prev.next_fetch <= now:
            return None
        return Revisit(
            now, prev.interval, prev.etag, prev.last_modified, prev.digest, prev.simhash, prev.changes,
            prev.fetches, prev.fetched_at,
        )  # fmt: skip


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)
