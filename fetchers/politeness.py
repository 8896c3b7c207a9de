"""In-process pacing: per-host and per-IP concurrency, minimum gaps between request starts, Retry-After
deferrals, and the fetcher-wide concurrency limit.

Fleet-wide politeness comes from the dispatcher leasing a host to one batch at a time; this module makes
the fetcher that holds the lease behave. One ``Pacer`` per fetcher, shared by all its batches, so two
batches (or a redirect into another batch's host) still see one set of limits.

The gap is measured between *starts*: a start is recorded only after every slot is held, with no await
between the final check and the record, so no two starts to a host are closer than its delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pipeline.settings import PolitenessSettings


class _Slots:
    """A counting semaphore with a synchronous fast path and direct hand-off to the first waiter
    (asyncio.Semaphore costs a coroutine per acquire even when free, and wakes waiters to re-compete)."""

    __slots__ = ("free", "waiters")

    def __init__(self, n: int) -> None:
        self.free = n
        self.waiters: deque[asyncio.Future[None]] = deque()

    def try_take(self) -> bool:
        if self.free > 0 and not self.waiters:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        if self.try_take():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        try:
            await fut  # resolved by give(): the slot is ours without touching ``free``
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.give()  # handed to us just as we were cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self.waiters.remove(fut)
            raise

    def give(self) -> None:
        waiters = self.waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self.free += 1


@dataclass(slots=True)
class _Lane:
    """Limits for one host or one IP."""

    slots: _Slots
    delay: float
    last_start: float = -1e18
    blocked_until: float = 0.0
    users: int = 0  # holders + waiters, so idle lanes can be dropped

    def ready_at(self) -> float:
        return max(self.last_start + self.delay, self.blocked_until)


Grant = tuple[_Lane, "_Lane | None"]


class Deferred(Exception):
    """The host may not be contacted for longer than the caller is willing to wait."""

    def __init__(self, host: str, wait_s: float) -> None:
        super().__init__(f"{host} deferred for {wait_s:.1f}s")
        self.host = host
        self.wait_s = wait_s


class Pacer:
    """Grants request starts. ``acquire`` / ``release`` bracket one HTTP exchange."""

    def __init__(
        self,
        politeness: PolitenessSettings,
        *,
        concurrency: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        max_wait_s: float | None = None,
    ) -> None:
        self._p = politeness
        self._clock = clock
        self._sleep = sleep
        self._global = _Slots(concurrency)
        self._hosts: dict[str, _Lane] = {}
        self._ips: dict[str, _Lane] = {}
        # A Retry-After longer than this is handed back to the dispatcher instead of slept through.
        self.max_wait_s = 10.0 if max_wait_s is None else max_wait_s
        self._releases = 0

    # -- host facts -----------------------------------------------------------------------------------
    def _host(self, host: str) -> _Lane:
        lane = self._hosts.get(host)
        if lane is None:
            lane = _Lane(_Slots(max(1, self._p.per_host_concurrency)), self._p.min_host_delay_s)
            self._hosts[host] = lane
        return lane

    def _ip(self, ip: str) -> _Lane:
        lane = self._ips.get(ip)
        if lane is None:
            lane = _Lane(_Slots(max(1, self._p.per_ip_concurrency)), self._p.min_ip_delay_s)
            self._ips[ip] = lane
        return lane

    def set_crawl_delay(self, host: str, crawl_delay: float | None) -> None:
        """Gap for ``host`` = max(min_host_delay_s, Crawl-delay capped at max_crawl_delay_s)."""
        cd = min(float(crawl_delay or 0.0), self._p.max_crawl_delay_s)
        self._host(host).delay = max(self._p.min_host_delay_s, cd)

    def defer(self, host: str, seconds: float) -> None:
        """Keep ``host`` untouched for ``seconds`` (Retry-After, capped by max_retry_after_s)."""
        lane = self._host(host)
        until = self._clock() + min(max(seconds, 0.0), self._p.max_retry_after_s)
        lane.blocked_until = max(lane.blocked_until, until)

    def wait_for(self, host: str) -> float:
        """Seconds until ``host`` may next be contacted (0 when now)."""
        lane = self._hosts.get(host)
        return 0.0 if lane is None else max(0.0, lane.ready_at() - self._clock())

    # -- slots ----------------------------------------------------------------------------------------
    async def acquire(self, host: str, ip: str) -> Grant:
        """Wait for a host slot, an IP slot, both gaps and a global slot, then record the start.
        Returns the grant to hand to ``release``.

        Raises ``Deferred`` (holding nothing) when the host is blocked (Retry-After) for longer than
        ``max_wait_s``; Crawl-delay gaps (capped by settings) are always waited out.
        """
        hl = self._host(host)
        il = self._ip(ip) if ip else None
        hl.users += 1
        if il is not None:
            il.users += 1
        # Fast path: everything free and no gap pending; no suspension at all.
        now = self._clock()
        if (
            hl.ready_at() <= now
            and (il is None or il.ready_at() <= now)
            and self._global.free > 0
            and not self._global.waiters
            and hl.slots.try_take()
        ):
            if il is None or il.slots.try_take():
                self._global.free -= 1
                hl.last_start = now
                if il is not None:
                    il.last_start = now
                return hl, il
            hl.slots.give()
        got_host = got_ip = False
        try:
            await hl.slots.take()
            got_host = True
            if il is not None:
                await il.slots.take()
                got_ip = True
            while True:
                now = self._clock()
                ready = hl.ready_at() if il is None else max(hl.ready_at(), il.ready_at())
                if ready > now:
                    if hl.blocked_until - now > self.max_wait_s:  # Crawl-delay waits are always served
                        raise Deferred(host, hl.blocked_until - now)
                    await self._sleep(ready - now)
                    continue
                await self._global.take()
                now = self._clock()
                ready = hl.ready_at() if il is None else max(hl.ready_at(), il.ready_at())
                if ready <= now:  # no await between this check and the record below
                    hl.last_start = now
                    if il is not None:
                        il.last_start = now
                    return hl, il
                self._global.give()
        except BaseException:
            if got_ip and il is not None:
                il.slots.give()
            if got_host:
                hl.slots.give()
            self._drop(hl, il)
            raise

    def restart(self, grant: Grant) -> None:
        """The request of ``grant`` goes out only now (a new connection took time to come up): the host's
        and the IP's gaps count from here, so the server never sees two starts closer than the delay.
        Called by the transport, possibly from a worker thread (a float written under the GIL)."""
        hl, il = grant
        now = self._clock()
        hl.last_start = max(hl.last_start, now)
        if il is not None:
            il.last_start = max(il.last_start, now)

    def release(self, grant: Grant) -> None:
        hl, il = grant
        self._global.give()
        hl.slots.give()
        if il is not None:
            il.slots.give()
        self._drop(hl, il)

    def _drop(self, hl: _Lane, il: _Lane | None) -> None:
        hl.users -= 1
        if il is not None:
            il.users -= 1
        self._releases += 1
        if self._releases >= 4096:
            self._sweep()

    def _sweep(self) -> None:
        """Forget idle lanes whose gaps have passed, so memory tracks active hosts, not history.
        (A dropped Crawl-delay comes back: the engine re-applies the robots delay before every start.)"""
        self._releases = 0
        now = self._clock()
        for table in (self._hosts, self._ips):
            idle = [k for k, v in table.items() if v.users <= 0 and v.ready_at() < now]
            for k in idle:
                del table[k]

    @property
    def global_free(self) -> int:
        return self._global.free


def parse_retry_after(value: str, *, now: float) -> float | None:
    """Seconds to wait from a Retry-After value: delta-seconds or an HTTP-date (RFC 9110 10.2.3).
    ``now`` is wall-clock epoch seconds (HTTP-dates are absolute). None when unparseable; never negative."""
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)
