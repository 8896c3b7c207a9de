"""The dispatcher's view of the link jobs (``crawlfleet links``). Pure: clock injected, no I/O.

A node's reply names the closed segment that holds its batch; a links report names the segments the
jobs have processed. The crawl may end only when no replied segment waits for the jobs and the
store's pending set holds nothing the frontier does not know (the caller's ``restore`` re-reads it:
a links report lost to a crash of the jobs is found there). A report can overtake the reply naming
its segment, so both directions are remembered.

A reply is awaited unless the caller calls it ``late`` (its batches were never issued by this process)
or it is a copy (a node publishes its reply again after a broker reconnect): its segment is awaited
already or was reported (``REPORTED_KEPT`` remembered). The reply of a batch that expired here is not
late: a node declared dead while only slow (a loaded box) still stored its pages and closed their
segment, and only the links report says their links are in the pending set (ending without it left
them uncrawled: a crawl under load ended at its seeds).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)

PENDING_CHECK_S = 2.0  # between two re-reads of the pending set (a full key scan of the store)
SILENCE_S = 30.0  # segments waiting this long with no links report: say so (once per period)
LAG_SAMPLES = 100_000  # link lags kept for the summary's percentiles (the newest)
REPORTED_KEPT = 100_000  # reported segments remembered, to know a copy of their reply (the newest)


class LinkProgress:
    def __init__(self, *, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.awaiting: set[str] = set()  # replied, not yet reported processed
        self._early: set[str] = set()  # reported processed before their reply arrived
        self._reported: dict[str, None] = {}  # reported and replied, oldest first (``REPORTED_KEPT``)
        self._next_check = 0.0
        self._settled = False  # the last check found nothing owed, and nothing came since
        self._heard = clock()
        self._warned = float("-inf")
        self._arrived: dict[str, float] = {}  # awaited segment -> when its reply arrived
        self.lags: list[float] = []  # seconds from a segment's reply to the links report naming it

    def on_reply(self, segment: str, *, late: bool = False) -> None:
        """A node's reply names ``segment``. ``late`` (every batch it answers was never issued by this
        process) and a copy of an earlier reply wait for nothing: the segment is awaited already, or its
        links report may be in, and awaiting it again would wait for ever (found by the RabbitMQ kill
        trial: the crawl never ended)."""
        if late:
            return
        if segment in self._early:
            self._early.discard(segment)
            self._done(segment)
            self._lag(0.0)
            self._settled = False
        elif segment not in self.awaiting and segment not in self._reported:
            self.awaiting.add(segment)
            self._arrived[segment] = self._clock()
            self._settled = False

    def on_report(self, segments: Iterable[str]) -> None:
        self._settled = False
        self._heard = self._clock()
        now = self._heard
        for seg in segments:
            if seg in self.awaiting:
                self.awaiting.discard(seg)
                self._done(seg)
                self._lag(now - self._arrived.pop(seg, now))
            elif seg not in self._reported:
                self._early.add(seg)

    def _done(self, segment: str) -> None:
        self._reported[segment] = None
        if len(self._reported) > REPORTED_KEPT:
            del self._reported[next(iter(self._reported))]

    def _lag(self, seconds: float) -> None:
        self.lags.append(seconds)
        if len(self.lags) > 2 * LAG_SAMPLES:
            del self.lags[:-LAG_SAMPLES]

    def lag_summary(self) -> dict[str, float]:
        """The link lag (a segment's reply to the links report naming it: the time its pages' links take to
        reach the pending set, less the node's part of a second): p50, p95, max, count."""
        if not self.lags:
            return {"count": 0}
        ordered = sorted(self.lags[-LAG_SAMPLES:])
        p50, p95 = (ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.5, 0.95))
        return {"count": len(ordered), "p50_s": round(p50, 3), "p95_s": round(p95, 3), "max_s": round(ordered[-1], 3)}

    def settled(self, restore: Callable[[], int]) -> bool:
        """True when the jobs owe nothing: no segment waits, and ``restore()`` (re-read the pending set,
        return how many URLs it found that the frontier did not know) finds none. ``restore`` runs at
        most every PENDING_CHECK_S."""
        if self.awaiting:
            return False
        if self._settled:
            return True  # stays settled until a reply or a report arrives (a finished crawl is done once)
        now = self._clock()
        if now < self._next_check:
            return False
        self._next_check = now + PENDING_CHECK_S
        self._settled = restore() == 0
        return self._settled

    def silence(self) -> float | None:
        """Seconds without a links report while segments wait, once per SILENCE_S; else None."""
        now = self._clock()
        if not self.awaiting:
            self._heard = now
            return None
        silent = now - self._heard
        if silent >= SILENCE_S and now - self._warned >= SILENCE_S:
            self._warned = now
            return silent
        return None

    def warn_if_silent(self, *, service: str, out_dir: str) -> dict[str, Any] | None:
        """Log (once per SILENCE_S) that segments wait on silent link jobs; the event's fields, or None."""
        silent = self.silence()
        if silent is None:
            return None
        log.warning("%d segments wait for the link jobs and none reported for %.0fs: is `crawlfleet links "
                    "--service %s --out %s` running?", len(self.awaiting), silent, service, out_dir)  # fmt: skip
        return {"waiting": len(self.awaiting), "silent_s": round(silent, 1)}
