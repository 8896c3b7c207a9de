"""A simple in-memory frontier that satisfies ``FrontierLike`` exactly, for the simulation and tests.

Not the product frontier (that is ``pipeline/frontier/frontier.py``): no per-IP limits, no depth priority, no
persistence. Per-host FIFO queues; hosts served round-robin; a host is leased to one fetcher at a time
and is not leasable again until ``release`` plus its delay. Each host gives at most ``per_host`` URLs
to one lease, so a batch spreads over hosts (the fetcher's per-host politeness then bounds its time).

Host states: ready (queued, leasable now), waiting (queued, next-allowed time in the future), leased,
idle (nothing queued). ``available`` is exact for ready hosts and costs O(hosts that became due).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from fetchers.records import UrlTask

READY, WAITING, LEASED, IDLE = "ready", "waiting", "leased", "idle"


def _host(url: str) -> str:
    """The lower-cased host of an absolute URL (urlsplit is the slow part of a simulation otherwise)."""
    rest = url.partition("://")[2]
    netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")].lower()
    return netloc.partition(":")[0].lower()


class MemoryFrontier:
    def __init__(
        self, *, per_host: int = 16, host_delay_s: float = 0.0, host_of: Callable[[str], str] = _host
    ) -> None:
        if per_host < 1:
            raise ValueError("per_host must be >= 1")
        self.per_host = per_host
        self.host_delay_s = host_delay_s
        self._host_of = host_of
        self._queues: dict[str, deque[UrlTask]] = {}
        self._state: dict[str, str] = {}
        self._ready: deque[str] = deque()
        self._ready_urls = 0  # URLs queued in READY hosts
        self._waiting: list[tuple[float, str]] = []
        self._next_allowed: dict[str, float] = {}
        self._leased_by: dict[str, set[str]] = {}  # fetcher -> hosts
        self._pending_ids: set[int] = set()
        self.leased_total = 0
        self.requeued_total = 0

    # --- input -----------------------------------------------------------------------------------
    def add(self, tasks: Iterable[UrlTask], now: float = 0.0) -> int:
        """Queue tasks not already pending; returns how many were added."""
        added = 0
        for task in tasks:
            if task.url_id in self._pending_ids:
                continue
            self._push(task, now, front=False)
            added += 1
        return added

    # --- FrontierLike ----------------------------------------------------------------------------
    def lease(self, fetcher_id: str, n: int, now: float) -> list[UrlTask]:
        self._promote(now)
        out: list[UrlTask] = []
        hosts = self._leased_by.setdefault(fetcher_id, set())
        while len(out) < n and self._ready:
            host = self._ready.popleft()
            queue = self._queues[host]
            take = min(self.per_host, n - len(out), len(queue))
            for _ in range(take):
                task = queue.popleft()
                self._pending_ids.discard(task.url_id)
                out.append(task)
            self._ready_urls -= len(queue) + take  # the whole host leaves READY
            self._state[host] = LEASED
            hosts.add(host)
        self.leased_total += len(out)
        return out

    def release(self, fetcher_id: str, now: float, *, host_delays: Mapping[str, float] = {}) -> None:
        for host in self._leased_by.pop(fetcher_id, ()):
            allowed = now + max(0.0, host_delays.get(host, self.host_delay_s))
            self._next_allowed[host] = allowed
            self._state[host] = IDLE
            if self._queues[host]:
                self._schedule(host, now)

    def requeue(self, fetcher_id: str, tasks: Sequence[UrlTask]) -> None:
        for task in reversed(tasks):  # appendleft in reverse keeps the original order at the front
            if task.url_id not in self._pending_ids:
                self._push(task, None, front=True)
                self.requeued_total += 1

    def available(self, now: float) -> int:
        self._promote(now)
        return self._ready_urls

    # --- introspection ---------------------------------------------------------------------------
    def pending(self) -> int:
        return len(self._pending_ids)

    def is_pending(self, url_id: int) -> bool:
        return url_id in self._pending_ids

    def leased_hosts(self, fetcher_id: str) -> set[str]:
        return set(self._leased_by.get(fetcher_id, ()))

    def host_state(self, host: str) -> str:
        return self._state.get(host, IDLE)

    # --- internals -------------------------------------------------------------------------------
    def _push(self, task: UrlTask, now: float | None, *, front: bool) -> None:
        host = self._host_of(task.url)
        queue = self._queues.setdefault(host, deque())
        if front:
            queue.appendleft(task)
        else:
            queue.append(task)
        self._pending_ids.add(task.url_id)
        state = self._state.get(host, IDLE)
        if state == READY:
            self._ready_urls += 1
        elif state == IDLE:
            self._schedule(host, now)

    def _schedule(self, host: str, now: float | None) -> None:
        """Move an IDLE host with queued URLs to READY or WAITING (``now`` None: as of the last promote)."""
        allowed = self._next_allowed.get(host, float("-inf"))
        if now is not None and allowed <= now:
            self._make_ready(host)
        else:
            # Unknown time (a requeue) or not yet allowed: let _promote decide at the next lease.
            self._state[host] = WAITING
            heapq.heappush(self._waiting, (allowed, host))

    def _make_ready(self, host: str) -> None:
        self._state[host] = READY
        self._ready.append(host)
        self._ready_urls += len(self._queues[host])

    def _promote(self, now: float) -> None:
        while self._waiting and self._waiting[0][0] <= now:
            _, host = heapq.heappop(self._waiting)
            if self._state.get(host) == WAITING:
                self._make_ready(host)
