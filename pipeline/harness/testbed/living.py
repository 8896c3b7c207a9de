"""The living web: which normal pages change, when, and how; a pure function of the clock (issue #23).

Off by default: a ``Web`` without ``living`` is the static web, byte for byte. With
``Web(..., living=Living(epoch=E, rate=R))`` (``testbed serve --mutate``) every normal page (home and
``/p/{n}``) belongs to one change class, chosen from ``(seed, host, page)``:

=========  =====  =====================================================================================
class      share  what changes (mean interval in *test* seconds)
=========  =====  =====================================================================================
static     40 %   nothing, ever
hourly     20 %   its text (a reader's change), every ``MEAN_S['hourly']`` = 3600 s on average
fast       20 %   its text, every ``MEAN_S['fast']`` = 5 s on average
dated      10 %   only an "Updated <date>" line, every 10 s: a near-duplicate change, content unchanged
advert     10 %   only an ad slot's words, every 3 s: a near-duplicate change, content unchanged
=========  =====  =====================================================================================

That is the ``classic`` mix (the default: ``Living(..., mix="classic")``). ``Living(..., mix="measured")``
is a mix modelled on published measurements of how often real pages change (the freshness bench's
``--mix measured``; docs/bench/freshness.md says why these shares):

=========  =====  =====================================================================================
class      share  what changes (mean interval in *test* seconds)
=========  =====  =====================================================================================
static     35 %   nothing, ever
markup     10 %   only an "Updated <date>" line, daily: a markup-only change, content unchanged
daily      15 %   its text, every 86,400 s (a day) on average
weekly     25 %   its text, every 604,800 s (a week) on average
monthly    15 %   its text, every 2,592,000 s (30 days) on average
=========  =====  =====================================================================================

``Living(..., mix="dotcom")`` is a second published mix, the observed change frequencies of ``.com`` pages
(docs/bench/freshness.md gives the sources: Cho & Garcia-Molina 2000, Fetterly et al. 2003, Ntoulas et al.
2004): half the pages never change, a quarter change daily:

=========  =====  =====================================================================================
class      share  what changes
=========  =====  =====================================================================================
static     50 %   nothing, ever
markup     12 %   only an "Updated <date>" line, daily
daily      23 %   its text, daily
weekly      5 %   its text, weekly
monthly    10 %   its text, every 30 days
=========  =====  =====================================================================================

A page that never changed was last modified ``STATIC_SINCE`` (a year of test time before the epoch): its
Last-Modified says what a real site's would, that it has not changed for a long time.

Links never change (the link graph and ``truth.compute_truth`` stay those of the static web).

Test time: ``t = (wall - epoch) * rate`` seconds, so ``rate=600`` shows ten test-minutes a second.
All times below are test seconds unless named ``wall``.

The change process of a page is a Bernoulli process on ticks: tick k covers
``[offset + k*tick_s, offset + (k+1)*tick_s)``; the page changes at the start of tick k when a hash
of ``(seed, host, page, k)`` falls below ``P_TICK`` = 1/4, or when ``(k + phase) % FORCE == 0``
(so a page never stays unchanged for more than ``FORCE`` ticks and the lookup is bounded).
``tick_s`` is chosen so the *expected* interval between changes is exactly ``MEAN_S[class]``.
The version of a page at t is the index k of its last change tick (an int, possibly negative,
strictly increasing with each change); static pages have version 0 since ``STATIC_SINCE``.

Interface used by other modules (stable): ``Living`` (``test_time(wall)``, ``wall_time(t)``, ``mix``),
``page_class(seed, i, m, mix=...)``, ``state(seed, i, m, t, mix=...)`` -> ``PageState``,
``content_changes(seed, i, m, t0, t1, mix=...)``, ``next_change(seed, i, m, t, mix=...)``, ``MEAN_S``,
``MIXES``, ``CONTENT_CLASSES``, ``COSMETIC_CLASSES``. Page m is the model's page number (0 = home, m >= 1 = ``/p/{m-1}``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

STATIC, HOURLY, FAST, DATED, ADVERT = "static", "hourly", "fast", "dated", "advert"
CLASSES = (STATIC, HOURLY, FAST, DATED, ADVERT)  # the classic mix's classes
MARKUP, DAILY, WEEKLY, MONTHLY = "markup", "daily", "weekly", "monthly"  # the measured mix's own
DAY_S = 86_400.0
CLASSIC, MEASURED, DOTCOM = "classic", "measured", "dotcom"
# Each mix: (cumulative percent, class), chosen by a page's hash. ``classic`` is the first living web's
# (unchanged); ``measured`` follows published change measurements (module docstring).
MIXES: dict[str, tuple[tuple[int, str], ...]] = {
    CLASSIC: ((40, STATIC), (60, HOURLY), (80, FAST), (90, DATED), (100, ADVERT)),
    MEASURED: ((35, STATIC), (45, MARKUP), (60, DAILY), (85, WEEKLY), (100, MONTHLY)),
    DOTCOM: ((50, STATIC), (62, MARKUP), (85, DAILY), (90, WEEKLY), (100, MONTHLY)),
}
MEAN_S = {
    STATIC: math.inf, HOURLY: 3600.0, FAST: 5.0, DATED: 10.0, ADVERT: 3.0,
    MARKUP: DAY_S, DAILY: DAY_S, WEEKLY: 7 * DAY_S, MONTHLY: 30 * DAY_S,
}  # fmt: skip
# A change a reader would call a change.
CONTENT_CLASSES = frozenset({HOURLY, FAST, DAILY, WEEKLY, MONTHLY})
COSMETIC_CLASSES = frozenset({DATED, ADVERT, MARKUP})  # bytes change, content does not
P_TICK_NUM, P_TICK_DEN = 1, 4
P_TICK = P_TICK_NUM / P_TICK_DEN
FORCE = 64
# Expected changes per tick: forced ticks plus the random ones among the others.
CHANGES_PER_TICK = 1 / FORCE + (1 - 1 / FORCE) * P_TICK
STATIC_SINCE = -365 * DAY_S  # test time of a static page's only version (Last-Modified a year old)
_MASK = (1 << 64) - 1


# A request with this Host makes the changing robots.txt (``robots_change_s``) change now, if it has not
# yet; answered with the serving process's pid and the change's wall time, never logged. A test starts
# the web with no change time and asks for the change once it has seen what it needs before it.
ROBOTS_CHANGE_HOST = "robots-change.invalid"


@dataclass(frozen=True, slots=True)
class Living:
    """The clock of a living web: ``epoch`` (wall seconds at test time 0) and ``rate`` (test seconds
    per wall second, > 0). ``hostile_sitemaps``: serve the hostile sitemap files (``sitemapgen``).
    ``mix``: which change classes pages get (a key of ``MIXES``). ``robots_change_s`` and
    ``throttle_every``: a robots.txt that changes, a host that throttles (see the fields)."""

    epoch: float
    rate: float = 1.0
    hostile_sitemaps: bool = True
    mix: str = CLASSIC
    # Politeness over time (model.py): the robots.txt of host ROBOTS_CHANGE_SLOT changes this many wall
    # seconds after the epoch (a path newly disallowed, a new Crawl-delay); inf = never.
    robots_change_s: float = math.inf
    # Host THROTTLE_SLOT answers every Nth request with 429 and Retry-After (0 = never).
    throttle_every: int = 0
    # Hosts i % 12 == 7 send validators that never change and answer 304 to them, whatever the page
    # became (a broken cache in front of the site): a crawler that trusts its 304s keeps stale copies.
    lying_validators: bool = False

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate) and math.isfinite(self.epoch)):
            raise ValueError(
                f"living web: rate must be > 0 and finite, epoch finite (got {self.rate}, {self.epoch})"
            )
        if self.mix not in MIXES:
            raise ValueError(f"living web: mix must be one of {', '.join(MIXES)} (got {self.mix!r})")
        if self.robots_change_s < 0 or self.throttle_every < 0:
            raise ValueError("living web: robots_change_s and throttle_every must be >= 0")

    def robots_changing_at(self, wall: float) -> Living:
        """This web with its robots.txt changing at ``wall``, unless it has changed by then already."""
        if self.robots_changed(wall):
            return self
        return dataclasses.replace(self, robots_change_s=max(0.0, wall - self.epoch))

    def robots_changed(self, wall: float) -> bool:
        """Whether the changing robots.txt (``robots_change_s``) has changed at wall time ``wall``."""
        return wall >= self.epoch + self.robots_change_s

    def test_time(self, wall: float) -> float:
        return (wall - self.epoch) * self.rate

    def wall_time(self, t: float) -> float:
        return self.epoch + t / self.rate


@dataclass(frozen=True, slots=True)
class PageState:
    """A normal page at test time t.

    ``version``: content version (index of the last content change tick; 0 for classes whose content
    never changes). ``cosmetic``: index of the last date/ad change (0 for other classes).
    ``changed_at``: test time of the last content change (``STATIC_SINCE`` when none).
    ``modified_at``: test time of the last change of the bytes (content or cosmetic); Last-Modified.
    """

    cls: str
    version: int
    cosmetic: int
    changed_at: float
    modified_at: float


def _mix(x: int) -> int:
    """splitmix64 finaliser: a well-spread 64-bit hash of an int."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _page_key(seed: int, i: int, m: int) -> int:
    return _mix(((seed & 0xFFFFFFFF) << 40) ^ (i << 20) ^ m ^ 0x5A17)


def page_class(seed: int, i: int, m: int, *, mix: str = CLASSIC) -> str:
    """The change class of normal page m of host i in ``mix`` (deterministic from the seed)."""
    pct = _page_key(seed, i, m) % 100
    for bound, cls in MIXES[mix]:
        if pct < bound:
            return cls
    return STATIC  # unreachable


def tick_s(cls: str) -> float:
    """Length of one tick of a class's change process (test seconds)."""
    return MEAN_S[cls] * CHANGES_PER_TICK


def _tick_params(key: int, cls: str) -> tuple[float, float, int]:
    step = tick_s(cls)
    return step, (key >> 8) % 1_000_000 / 1_000_000 * step, (key >> 32) % FORCE


def _changes(key: int, k: int, phase: int) -> bool:
    if (k + phase) % FORCE == 0:
        return True
    return _mix(key ^ ((k & _MASK) * 0xD6E8FEB86659FD93 & _MASK)) % P_TICK_DEN < P_TICK_NUM


def last_change(key: int, cls: str, t: float) -> tuple[int, float]:
    """(k, start of tick k) of the last change at or before test time t of a page of class ``cls``."""
    step, offset, phase = _tick_params(key, cls)
    k = math.floor((t - offset) / step)
    while not _changes(key, k, phase):  # at most FORCE - 1 steps back
        k -= 1
    return k, offset + k * step


def state(seed: int, i: int, m: int, t: float, *, mix: str = CLASSIC) -> PageState:
    """The state of normal page m of host i at test time t, in ``mix``."""
    cls = page_class(seed, i, m, mix=mix)
    if cls == STATIC:
        return PageState(cls, 0, 0, STATIC_SINCE, STATIC_SINCE)
    key = _page_key(seed, i, m)
    k, at = last_change(key, cls, t)
    if cls in CONTENT_CLASSES:
        return PageState(cls, k, 0, at, at)
    return PageState(cls, 0, k, STATIC_SINCE, at)


def content_changes(seed: int, i: int, m: int, t0: float, t1: float, *, mix: str = CLASSIC) -> list[float]:
    """Test times of the content changes of normal page m of host i in ``(t0, t1]`` (none for classes
    whose content never changes): what the freshness bench's oracle and age are computed from."""
    cls = page_class(seed, i, m, mix=mix)
    if cls not in CONTENT_CLASSES or t1 <= t0:
        return []
    key = _page_key(seed, i, m)
    step, offset, phase = _tick_params(key, cls)
    first, last = math.floor((t0 - offset) / step) + 1, math.floor((t1 - offset) / step)
    return [offset + k * step for k in range(first, last + 1) if _changes(key, k, phase)]


def next_change(seed: int, i: int, m: int, t: float, *, mix: str = CLASSIC) -> float:
    """Test time of the first content change of normal page m of host i after t (``inf`` for a class
    whose content never changes): when a copy taken at t went stale."""
    cls = page_class(seed, i, m, mix=mix)
    if cls not in CONTENT_CLASSES:
        return math.inf
    key = _page_key(seed, i, m)
    step, offset, phase = _tick_params(key, cls)
    k = math.floor((t - offset) / step) + 1
    while not _changes(key, k, phase):  # at most FORCE - 1 steps on
        k += 1
    return offset + k * step
