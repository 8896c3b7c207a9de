"""Per-host trust in change signals: how a host's re-fetches are asked for. Pure.

A re-fetch can be a conditional GET (the stored copy's ETag and Last-Modified: a 304 costs a few hundred
bytes instead of the page), a full GET, or skipped until the host's sitemap says the page changed. Which
one pays depends on the host, so each host's record (``HostSignals``) is learnt from its own answers,
judged by what the content (digest, simhash) shows:

- ``stale_validators``: a full answer (200) whose ETag (or, without one, Last-Modified) is the stored
  copy's while the content changed. A conditional GET there would have had a 304 for a page that changed:
  its 304s hide changes, and the host is fetched with full GETs from then on (``FULL``). Honest servers
  never show it; to catch servers whose 304s lie, every ``AUDIT_EVERY``-th re-fetch of a page goes out
  without validators (``audit``), and once ``CLEAN_AUDITS`` audits of a host found its validators honest,
  every ``AUDIT_EVERY_TRUSTED``-th: on an honest host it costs one page in that many re-fetches.
- ``ignored``: conditional re-fetches answered 200 with the stored bytes. A host that has ignored
  ``IGNORED_MIN`` and never answered 304 gets plain GETs (``PLAIN``): the validators cost request bytes and
  buy nothing there.
- ``lastmod_due`` / ``lastmod_changed``: re-fetches a sitemap ``lastmod`` asked for, and how many found
  the content changed. A host whose lastmods proved right (``LASTMOD_MIN`` of them, ``LASTMOD_TRUST`` of
  those right) has its sitemap-listed pages skipped (``skips``): they wait the longest interval unless
  their lastmod says they changed, and the sitemap itself is read on its own schedule.
- ``lm_follows`` / ``lm_strays``: windows where Last-Modified moved exactly when the content changed, or
  did not (the change-rate estimator uses the header only where it follows; this is the host's record,
  for the report).

Both crawl scales count the same way: the embedded crawl in memory as results are planned, the fleet's
crawl-db update job in the crawl db beside each host's rate histogram; whoever makes the batches asks
``validators_for``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from pipeline.frontier.changerate import http_time, lm_follows
from pipeline.storage.base import Revisit

CONDITIONAL, FULL, PLAIN = "conditional", "full", "plain"
AUDIT_EVERY = 16  # a page's every 16th re-fetch is a full GET while its host's 304s are trusted...
AUDIT_EVERY_TRUSTED = 128  # ...every 128th once CLEAN_AUDITS audits found its validators honest
CLEAN_AUDITS = 8
IGNORED_MIN = 8
LASTMOD_MIN = 5
LASTMOD_TRUST = 0.8


@dataclass(slots=True)
class HostSignals:
    """One host's record of what its change signals proved (module docstring)."""

    not_modified: int = 0  # 304s
    audits_clean: int = 0  # audits whose answer showed the validators honest
    ignored: int = 0
    stale_validators: int = 0
    lm_follows: int = 0
    lm_strays: int = 0
    lastmod_due: int = 0
    lastmod_changed: int = 0

    @property
    def mode(self) -> str:
        if self.stale_validators:
            return FULL
        if self.ignored >= IGNORED_MIN and not self.not_modified:
            return PLAIN
        return CONDITIONAL

    @property
    def skips(self) -> bool:
        """Its sitemap lastmods proved right: listed pages wait for them."""
        return self.lastmod_due >= LASTMOD_MIN and self.lastmod_changed >= LASTMOD_TRUST * self.lastmod_due

    def add(self, other: HostSignals) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}

    @classmethod
    def from_dict(cls, raw: object) -> HostSignals:
        """From ``as_dict`` output; anything unreadable counts as nothing (a corrupt row is relearnt)."""
        out = cls()
        if isinstance(raw, dict):
            for f in fields(cls):
                value = raw.get(f.name)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    setattr(out, f.name, value)
        return out


def audit_every(signals: HostSignals | None) -> int:
    return AUDIT_EVERY_TRUSTED if signals is not None and signals.audits_clean >= CLEAN_AUDITS else AUDIT_EVERY


def is_audit(prev: Revisit, signals: HostSignals | None) -> bool:
    """Whether the re-fetch of a page whose stored state is ``prev`` goes out without validators to check
    its host's 304s (stateless: the page's fetch count picks it)."""
    every = audit_every(signals)
    return prev.fetches % every == every - 1


def validators_for(prev: Revisit, signals: HostSignals | None) -> tuple[str, str]:
    """(ETag, Last-Modified) a re-fetch of a page whose stored state is ``prev`` should send: none on a
    host fetched with full or plain GETs, none on an audit, else the stored copy's."""
    mode = signals.mode if signals is not None else CONDITIONAL
    if mode != CONDITIONAL or is_audit(prev, signals):
        return "", ""
    return prev.etag, prev.last_modified


def observe(
    signals: HostSignals,
    prev: Revisit | None,
    *,
    status: int,
    etag: str,
    last_modified: str,
    digest: str,
    changed: bool,
    lastmod_asked: bool = False,
) -> None:
    """Count one final result of a re-fetch (``prev``: the stored state it was asked with; None: a first
    fetch, which tells nothing). ``changed``: the content changed (the schedule's verdict, simhash
    included); ``digest``: the exact digest of a 200's body."""
    if prev is None or prev.fetches <= 0 or not prev.digest:
        return
    if lastmod_asked:
        signals.lastmod_due += 1
        signals.lastmod_changed += changed
    if status == 304:
        signals.not_modified += 1
        return
    if status != 200:
        return
    was_audit = signals.mode == CONDITIONAL and is_audit(prev, signals)
    if digest and digest == prev.digest and (prev.etag or prev.last_modified) and not was_audit:
        signals.ignored += 1  # the stored bytes again: a 304 would have done
    was, now = http_time(prev.last_modified), http_time(last_modified)
    if was and now:
        if lm_follows(was, now, changed=changed):
            signals.lm_follows += 1
        else:
            signals.lm_strays += 1
    if changed:
        same_tag = bool(etag) and etag == prev.etag
        same_date = not etag and not prev.etag and bool(last_modified) and last_modified == prev.last_modified
        if same_tag or same_date:
            signals.stale_validators += 1  # a conditional GET would have been told "not modified"
            return
    if was_audit:
        signals.audits_clean += 1  # the validators told the truth about this page
