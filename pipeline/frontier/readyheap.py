"""The frontier's ready heap: the hosts it may lease, in the order their politeness clocks allow. Pure.

A host is in the heap while it is active, not leased and has URLs in its RAM window, keyed by
``HostState.next_allowed`` (ties in the order hosts entered). Entries are invalidated lazily: an entry is
current while its host is still known, marked ``in_heap`` and its clock still reads the entry's time;
any other (the host was forgotten, or left the heap and came back with another time) is dropped when
it reaches the top.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from pipeline.frontier.hoststate import HostState


class ReadyHeap:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []  # (next_allowed, seq, host)
        self._seq = 0

    def push(self, hs: HostState) -> None:
        """Enter ``hs`` unless it is in already, leased, not active, or its window is empty (a host that
        waits for a refill is pushed by the refill)."""
        if hs.in_heap or hs.leased_to or not hs.active or not hs.window:
            return
        hs.in_heap = True
        self._seq += 1
        heapq.heappush(self._heap, (hs.next_allowed, self._seq, hs.host))

    def pop(self, now: float, hosts: Mapping[str, HostState]) -> HostState | None:
        """The host whose clock allows it first, if that is by ``now``, taken out of the heap; else None.
        ``hosts``: the frontier's hosts by name (an entry of a host not there is stale)."""
        while self._heap and self._heap[0][0] <= now:
            at, _, host = heapq.heappop(self._heap)
            hs = hosts.get(host)
            if hs is not None and hs.in_heap and hs.next_allowed == at:
                hs.in_heap = False
                return hs
        return None

    def next_at(self, hosts: Mapping[str, HostState]) -> float | None:
        """When the earliest host in the heap becomes ready, or None when it holds none."""
        while self._heap:
            at, _, host = self._heap[0]
            hs = hosts.get(host)
            if hs is not None and hs.in_heap and hs.next_allowed == at:
                return at
            heapq.heappop(self._heap)
        return None
