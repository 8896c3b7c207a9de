"""One host's RAM window in priority order (issue #23 point 5): a heap, highest score first, then shallowest.

The score of a URL is its in-link count as the crawl db knows it when the URL enters the window (the fleet's
link jobs raise it in their crawl-db update step; ``Store.pending`` returns it as ``UrlRecord.inlinks``).
Depth breaks ties, then arrival order (the store's URL order), so with equal scores the window serves URLs
exactly as the FIFO ``HostQueue`` did. Per URL: one ``heappush`` and one ``heappop``, O(log window); no sort.

The same interface as ``HostQueue`` (``append``, ``appendleft``, ``popleft``, ``clear``, ``nbytes``), so the
frontier's politeness, leases and refill contract do not change: priority only decides *which* URLs of a host
a lease takes, never *when* the host may be contacted.
"""

from __future__ import annotations

import heapq
from collections import deque

from fetchers.records import UrlTask

_ENTRY_BYTES = 120  # a 5-tuple, its ints and the heap slot, beside the URL string itself


class ScoredQueue:
    """Heap of (-score, depth, seq, url, url_id) for URLs of one authority; given-back URLs first."""

    __slots__ = ("authority", "_heap", "_seq", "_front", "_bytes")

    def __init__(self, authority: str) -> None:
        self.authority = authority
        self._heap: list[tuple[int, int, int, str, int]] = []
        self._seq = 0
        self._front: deque[UrlTask] | None = None  # URLs given back (requeue): they were leased first already
        self._bytes = 0  # running total for nbytes (metrics read it often; no walk over the heap)

    def append(self, url: str, url_id: int, depth: int, score: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (-score, depth, self._seq, url, url_id))
        self._bytes += _ENTRY_BYTES + len(url)

    def appendleft(self, task: UrlTask) -> None:
        if self._front is None:
            self._front = deque()
        self._front.appendleft(task)

    def popleft(self) -> UrlTask:
        """The given-back URLs first, then the highest score (shallowest, then earliest on a tie)."""
        if self._front:
            return self._front.popleft()
        if not self._heap:
            raise IndexError("pop from an empty ScoredQueue")
        _, depth, _, url, url_id = heapq.heappop(self._heap)
        self._bytes -= _ENTRY_BYTES + len(url)
        return UrlTask(url, url_id, depth)

    def clear(self) -> None:
        self._heap = []
        self._front = None
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._heap) + (len(self._front) if self._front else 0)

    def __bool__(self) -> bool:
        return len(self) > 0

    def nbytes(self) -> int:
        """Bytes held for queued URLs (estimate: entries and URL strings, not the fixed headers)."""
        front = sum(100 + len(t.url) for t in self._front) if self._front else 0
        return self._bytes + front
