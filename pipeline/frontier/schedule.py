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
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

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


class Schedule:
    """The schedule a crawl runs with, built once from its settings (overrides parsed up front)."""

    __slots__ = ("cfg", "overrides")

    def __init__(self, cfg: RecrawlSettings) -> None:
        if not 0 < cfg.min_interval_s <= cfg.max_interval_s:
            raise ValueError("recrawl: expected 0 < min_interval_s <= max_interval_s")
        if not 0 <= cfg.dec_rate < 1:
            raise ValueError("recrawl.dec_rate: expected 0 <= dec_rate < 1")
        self.cfg = cfg
        self.overrides: Sequence[Override] = tuple(parse_override(o) for o in cfg.overrides)

    def bounds(self, url: str, host: str) -> tuple[float, float]:
        """(min, max) interval for ``url``: the first matching override's, else the settings'."""
        for o in self.overrides:
            if o.matches(url, host):
                return o.min_s, o.max_s
        return self.cfg.min_interval_s, self.cfg.max_interval_s

    def plan(self, prev: Revisit | None, obs: Observation, *, url: str, host: str) -> tuple[Change, Revisit]:
        """The fetch's change class and the URL's new re-crawl state."""
        cfg = self.cfg
        change = classify(prev, obs, simhash_bits=cfg.simhash_bits)
        low, high = self.bounds(url, host)
        interval = prev.interval if prev is not None and prev.interval > 0 else cfg.initial_interval_s
        ref = obs.fetched_at
        if change is Change.FAILED:
            keep = prev or Revisit(0.0, interval)
            nxt = obs.fetched_at + min(max(cfg.failed_interval_s, low), high)
            return change, Revisit(
                nxt, _clamp(interval, low, high), keep.etag, keep.last_modified, keep.digest, keep.simhash,
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
