"""An index that finds S1's chosen fetcher (max u with u > t) without scanning the fleet.

u = p*s + q - r changes for *every* fetcher when the second s changes, but within one second it changes
only for the fetcher that was granted URLs (r grows) or that sent a heartbeat (p, q). So the index is a
max-heap of (u, fetcher) valid for one absolute second: rebuilt (O(F)) the first time it is used in a
new second, updated (O(log F)) on a grant or heartbeat. Stale entries are skipped by a version stamp.

The chooser pops in (-u, fetcher id) order and returns the first fetcher that passes the caller's
test (live, not at its cap, u > t); the ones that fail because u <= t are put back (t may shrink with
the budget in the same second), those not live or at their cap are dropped until an event re-adds them.
This picks exactly what ``Admission.choose`` would pick over the same fetchers (property-tested).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable


class CandidateIndex:
    def __init__(self) -> None:
        self._heap: list[tuple[float, str, int]] = []
        self._version: dict[str, int] = {}
        self._stamp = 0
        self.second: int | None = None  # the absolute second (floor(now)) the u values are for
        self.rebuilds = 0

    def rebuild(self, second: int, entries: Iterable[tuple[str, float]]) -> None:
        self._version.clear()
        self._heap = []
        for fid, u in entries:
            self._stamp += 1
            self._version[fid] = self._stamp
            self._heap.append((-u, fid, self._stamp))
        heapq.heapify(self._heap)
        self.second = second
        self.rebuilds += 1

    def put(self, fetcher_id: str, u: float) -> None:
        self._stamp += 1
        self._version[fetcher_id] = self._stamp
        heapq.heappush(self._heap, (-u, fetcher_id, self._stamp))
        if len(self._heap) > 4 * len(self._version) + 64:  # too many stale entries: compact
            self._heap = [e for e in self._heap if self._version.get(e[1]) == e[2]]
            heapq.heapify(self._heap)

    def discard(self, fetcher_id: str) -> None:
        self._version.pop(fetcher_id, None)

    def invalidate(self) -> None:
        """Force a rebuild at the next use (e.g. after the minute's r counters were reset)."""
        self.second = None

    def choose(self, accept: Callable[[str, float], str]) -> tuple[str, float] | None:
        """Pop fetchers best-first; ``accept(fid, u)`` answers "yes", "retry" (u <= t: keep it) or "drop"."""
        keep: list[tuple[str, float]] = []
        found: tuple[str, float] | None = None
        heap, version = self._heap, self._version
        while heap:
            neg_u, fid, stamp = heapq.heappop(heap)
            if version.get(fid) != stamp:
                continue
            del version[fid]
            verdict = accept(fid, -neg_u)
            if verdict == "yes":
                found = (fid, -neg_u)
                break
            if verdict == "retry":
                keep.append((fid, -neg_u))
        for fid, u in keep:
            self.put(fid, u)
        return found

    def __contains__(self, fetcher_id: object) -> bool:
        return fetcher_id in self._version

    def __len__(self) -> int:
        return len(self._version)
