"""Which of the frontier's hosts it works on now: Heritrix's active and inactive queues. Pure.

Only active hosts hold a window of URLs in RAM and take part in leasing; the others wait in FIFO order
with their URLs in the store only. Working on fewer hosts at once keeps their store rows (fingerprints
are host-clustered), seen-table neighbourhoods and link-memo entries hot: with every host active, a
million-page crawl touches the whole crawl database between two visits to one host (#11).

Rules, for a floor of ``floor`` hosts (0 = every host is active, nothing ever waits):
- a host with pending URLs is activated at once while fewer than ``floor`` are active, else it waits;
- a drained host (nothing pending, idle) is deactivated and the next waiting host takes its place;
- when no active host is ready at a lease (all leased, waiting out a delay, or capped per IP), more
  hosts are activated, so politeness never starves the fetchers. The set then stays larger until
  hosts drain: it grows to what the fetchers need and shrinks back toward the floor;
- with ``session_urls`` > 0, an active host that has had that many URLs leased since its activation
  goes to the back of the queue when others wait, so a few deep hosts cannot hold every place.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

from pipeline.frontier.hoststate import HostState


class ActiveHosts:
    """The active set and the waiting queue. ``push`` puts an activated host into the frontier's ready
    heap (it ignores a host without a window: that one waits for its refill)."""

    def __init__(
        self, *, floor: int, session_urls: int, urls_per_host: int, push: Callable[[HostState], None]
    ) -> None:
        self.floor = floor
        self.session_urls = session_urls
        self._urls_per_host = max(1, urls_per_host)
        self._push = push
        self._active: dict[str, HostState] = {}
        self._waiting: deque[HostState] = deque()
        self.activations = 0

    def __len__(self) -> int:
        return len(self._active)

    def __iter__(self) -> Iterator[HostState]:
        return iter(self._active.values())  # callers do not activate or deactivate while iterating

    @property
    def waiting(self) -> int:
        return len(self._waiting)  # dropped entries included until they are popped

    def enlist(self, hs: HostState) -> None:
        """A host that has pending URLs and is not active: activate it now while there is room."""
        if not self.floor or len(self._active) < self.floor:
            self._activate(hs)
        elif not hs.waiting:
            hs.waiting = True
            self._waiting.append(hs)

    def activate_more(self, wanted_urls: int) -> None:
        """No active host is ready: activate enough waiting hosts for ``wanted_urls``."""
        n = -(-wanted_urls // self._urls_per_host)
        while n > 0 and self._waiting:
            hs = self._waiting.popleft()
            if not hs.waiting:
                continue  # dropped (handed to another shard)
            hs.waiting = False
            if not hs.active and hs.pending > 0:
                self._activate(hs)
                n -= 1

    def settle(self, hs: HostState) -> None:
        """Deactivate ``hs`` if it is drained and idle, and let the next waiting host in."""
        if not hs.active or hs.leased_to or hs.pending or hs.window or not hs.complete:
            return
        self._deactivate(hs)

    def drop(self, hs: HostState) -> None:
        """``hs`` leaves the frontier (handed to another shard): out of the active set, and a waiting entry
        is made inert (``pending`` 0 is skipped by every activation)."""
        if hs.active:
            self._deactivate(hs)
        hs.waiting = False

    def waiting_tail(self) -> Iterator[HostState]:
        """Waiting hosts, the last to be activated first (S5: surplus is taken from the queue's tail)."""
        return (hs for hs in reversed(self._waiting) if hs.waiting and not hs.active)

    def yields_place(self, hs: HostState) -> bool:
        """At the end of a lease of ``hs`` (idle, URLs still pending): True when it used its session
        budget while others wait. It then goes to the back of the queue without its window: those URLs
        are PENDING in the store, and its next activation refills them."""
        if not self.session_urls or hs.session < self.session_urls or not self._waiting or not hs.active:
            return False
        hs.window.clear()
        hs.complete = False
        self._deactivate(hs)
        hs.waiting = True
        self._waiting.append(hs)
        return True

    def _activate(self, hs: HostState) -> None:
        hs.active = True
        hs.session = 0
        self._active[hs.host] = hs
        self.activations += 1
        self._push(hs)

    def _deactivate(self, hs: HostState) -> None:
        hs.active = False
        del self._active[hs.host]
        while self._waiting and len(self._active) < self.floor:
            nxt = self._waiting.popleft()
            if not nxt.waiting:
                continue  # dropped (handed to another shard)
            nxt.waiting = False
            if not nxt.active and nxt.pending > 0:
                self._activate(nxt)
