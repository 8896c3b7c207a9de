"""When a link round opens: at once, or after gathering more segments while the crawl is fed.

Every round writes an in-link cell for each known URL its pages link to (``hbase_inlinks``), so many small
rounds cost the link jobs and the store more than a few large ones over the same pages (2.2x the cells on a
100k-page web: docs/FLEET.md, "One machine: pages/s or link lag"). A round's delay only costs the crawl
when its nodes run short of work, which the store's pending set says. So with ``fleet.link_gather_s`` > 0
a round waits for more closed segments, until ``max_segments`` wait or the oldest has waited
``gather_s``, but only while the pending set holds enough URLs to keep the nodes fetching meanwhile: the
rate the rounds have been carrying pages at, over the gather and the last round's own time, twice over.
A crawl running short (a narrow web's tail, its start) gets its rounds at once, as with ``gather_s`` 0.

Pure: the clock, the pending count and the rounds' figures come from the caller.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.storage.segments import SegmentInfo

RATE_WINDOW_S = 20.0  # rounds reported this recently give the rate pages arrive at
FED_CHECK_S = 0.5  # the pending count is read at most this often while gathering
FED_MARGIN = 2.0  # pending URLs must cover this many times the pages the wait and a round take


@dataclass(slots=True)
class RoundGather:
    gather_s: float = 0.0  # 0 = every round opens at once
    max_segments: int = 256
    _rounds: deque[tuple[float, int, float]] = field(default_factory=deque)  # (reported at, pages, seconds)
    _fed: tuple[float, bool] = (float("-inf"), False)  # (read at, fed)

    def reported(self, now: float, pages: int, seconds: float) -> None:
        """A round was reported at ``now``: ``pages`` results, ``seconds`` from its claim to its report."""
        self._rounds.append((now, pages, seconds))
        while self._rounds and now - self._rounds[0][0] > RATE_WINDOW_S:
            self._rounds.popleft()

    def need(self, now: float) -> float | None:
        """Pending URLs that keep the nodes busy while a round gathers and runs; None with no recent rounds."""
        recent = [r for r in self._rounds if now - r[0] <= RATE_WINDOW_S]
        if len(recent) < 2:
            return None
        span = max(1.0, now - recent[0][0])
        rate = sum(pages for _, pages, _ in recent) / span
        return FED_MARGIN * rate * (self.gather_s + recent[-1][2])

    def wait(self, todo: Sequence[SegmentInfo], now: float, pending: Callable[[], int]) -> bool:
        """True: leave ``todo`` (closed, unclaimed, oldest first) for a later, larger round."""
        if self.gather_s <= 0 or not todo or len(todo) >= self.max_segments:
            return False
        if now - todo[0].mtime >= self.gather_s:
            return False
        need = self.need(now)
        if need is None:
            return False
        read_at, fed = self._fed
        if now - read_at >= FED_CHECK_S:
            fed = pending() >= need
            self._fed = (now, fed)
        return fed
