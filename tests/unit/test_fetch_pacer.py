"""Pacer (in-process host/IP pacing) on a virtual clock, and Retry-After parsing."""

from __future__ import annotations

import asyncio
import email.utils
from dataclasses import replace
from typing import TypedDict, Unpack

import pytest

from fetchers.politeness import Deferred, Pacer, parse_retry_after
from pipeline.settings import PolitenessSettings


class VirtualTime:
    """A clock that only moves when a coroutine sleeps on it."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s
        await asyncio.sleep(0)


class Overrides(TypedDict, total=False):
    """The politeness settings a test sets for its pacer."""

    per_host_concurrency: int
    per_ip_concurrency: int
    min_host_delay_s: float
    max_crawl_delay_s: float
    max_retry_after_s: float


def _pacer(vt: VirtualTime, **kw: Unpack[Overrides]) -> Pacer:
    p = replace(PolitenessSettings(per_host_concurrency=2, per_ip_concurrency=8, min_host_delay_s=0.25), **kw)
    return Pacer(p, concurrency=16, clock=vt, sleep=vt.sleep)


def test_gap_between_starts_and_crawl_delay_cap() -> None:
    vt = VirtualTime()
    pacer = _pacer(vt, max_crawl_delay_s=1.0)
    starts: list[float] = []

    async def one() -> None:
        grant = await pacer.acquire("h", "1.2.3.4")
        starts.append(vt())
        pacer.release(grant)

    async def go() -> None:
        await asyncio.gather(*(one() for _ in range(5)))
        pacer.set_crawl_delay("h", 99.0)  # capped at 1.0
        await asyncio.gather(*(one() for _ in range(2)))

    asyncio.run(go())
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert all(g >= 0.25 - 1e-9 for g in gaps[:4]), gaps
    assert gaps[-1] >= 1.0 - 1e-9 and gaps[-1] < 2.0


def test_concurrency_limits() -> None:
    vt = VirtualTime()
    pacer = _pacer(vt, min_host_delay_s=0.0, per_ip_concurrency=3)
    now = {"h1": 0, "h2": 0, "ip": 0}
    peak = {"h1": 0, "h2": 0, "ip": 0}

    async def one(host: str) -> None:
        grant = await pacer.acquire(host, "9.9.9.9")
        now[host] += 1
        now["ip"] += 1
        for k in (host, "ip"):
            peak[k] = max(peak[k], now[k])
        await asyncio.sleep(0.001)
        now[host] -= 1
        now["ip"] -= 1
        pacer.release(grant)

    async def go() -> None:
        await asyncio.gather(*(one(h) for h in ("h1", "h2") for _ in range(6)))

    asyncio.run(go())
    assert peak["h1"] == 2 and peak["h2"] == 2 and peak["ip"] == 3
    assert pacer.global_free == 16


def test_retry_after_defers_or_waits() -> None:
    vt = VirtualTime()
    pacer = _pacer(vt, min_host_delay_s=0.0, max_retry_after_s=600.0)

    async def go() -> None:
        pacer.defer("h", 3.0)
        grant = await pacer.acquire("h", "")  # a short back-off is waited out
        assert vt() == pytest.approx(3.0)
        pacer.release(grant)
        pacer.defer("h", 5000.0)  # capped at 600
        assert pacer.wait_for("h") == pytest.approx(600.0)
        with pytest.raises(Deferred):
            await pacer.acquire("h", "")
        assert pacer.global_free == 16  # nothing held after a refusal

    asyncio.run(go())


def test_idle_lanes_are_forgotten() -> None:
    vt = VirtualTime()
    pacer = _pacer(vt, min_host_delay_s=0.0)

    async def go() -> None:
        for i in range(5000):
            pacer.release(await pacer.acquire(f"h{i}", f"10.0.{i // 256}.{i % 256}"))
            vt.t += 0.001

    asyncio.run(go())
    assert len(pacer._hosts) < 1000 and len(pacer._ips) < 1000


def test_parse_retry_after() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("120", now=now) == 120.0
    assert parse_retry_after(" 0 ", now=now) == 0.0
    date = email.utils.formatdate(now + 90, usegmt=True)
    assert parse_retry_after(date, now=now) == pytest.approx(90.0, abs=1)
    assert parse_retry_after(email.utils.formatdate(now - 90, usegmt=True), now=now) == 0.0
    for junk in ("", "soon", "-5", "1.5e9x", "Mon, 99 Foo 2024"):
        assert parse_retry_after(junk, now=now) is None


def test_cancelled_waiters_do_not_leak_slots() -> None:
    vt = VirtualTime()
    pacer = _pacer(vt, min_host_delay_s=0.0, per_host_concurrency=1)

    async def go() -> None:
        first = await pacer.acquire("h", "")
        waiters = [asyncio.ensure_future(pacer.acquire("h", "")) for _ in range(3)]
        await asyncio.sleep(0)
        waiters[0].cancel()
        pacer.release(first)  # waiter 0 is cancelled, so the slot goes to waiter 1
        waiters[1].cancel()  # cancelled after being granted, before it ran: must pass the slot on
        await asyncio.gather(*waiters[:2], return_exceptions=True)
        grant = await waiters[2]
        pacer.release(grant)
        assert pacer.global_free == 16 and pacer._hosts["h"].slots.free == 1

    asyncio.run(go())


def test_a_slow_connect_restarts_the_gap_from_the_send() -> None:
    """A request whose new connection took 0.2 s goes out at 0.2: the next start keeps the whole 0.25 s from
    there (0.45), not from the grant (0.25), so the server never sees the two closer than the delay."""
    vt = VirtualTime()
    pacer = _pacer(vt)

    async def go() -> float:
        first = await pacer.acquire("h", "1.2.3.4")
        vt.t += 0.2  # connecting
        pacer.restart(first)  # the transport, once the connection is up
        pacer.release(first)
        second = await pacer.acquire("h", "1.2.3.4")
        pacer.release(second)
        return vt()

    assert asyncio.run(go()) == 0.45
    assert pacer.wait_for("other") == 0.0


def test_the_transport_restarts_the_gap_only_when_the_fence_lets_it_send() -> None:
    from fetchers.retrying import _at_send

    vt = VirtualTime()
    pacer = _pacer(vt)

    async def go() -> tuple[bool, float, bool, float]:
        grant = await pacer.acquire("h", "1.2.3.4")
        vt.t = 0.1
        fenced = _at_send(lambda: False, pacer, grant)()
        after_fenced = pacer.wait_for("h")
        sent = _at_send(None, pacer, grant)()
        pacer.release(grant)
        return fenced, after_fenced, sent, pacer.wait_for("h")

    fenced, after_fenced, sent, after_sent = asyncio.run(go())
    assert not fenced and abs(after_fenced - 0.15) < 1e-9  # not sent: the gap still runs from the grant
    assert sent and abs(after_sent - 0.25) < 1e-9


def test_the_gap_counts_from_the_send_on_a_pooled_connection_too() -> None:
    """The first request is held up 0.02 s between its grant and its write (a loaded machine: the GIL, a
    lock); the second, granted while the first is in flight (2 per host), still goes out a whole delay
    after the first's send (at 0.27, not 0.25), and each recorded start is its send."""
    from fetchers.exchange import SENT, Exchange
    from fetchers.retrying import paced_exchange

    vt = VirtualTime()
    pacer = _pacer(vt)
    sends: list[float] = []

    class Held:
        stall = [0.02, 0.0]

        async def exchange(self, url: str, host: str, ip: str, *, max_body: int) -> Exchange:
            vt.t += self.stall.pop(0)
            went = SENT.get()
            assert went is not None
            went()
            sends.append(vt())
            await asyncio.sleep(0)  # in flight: the other request acquires meanwhile
            return Exchange(status=200)

    async def go() -> list[list[tuple[float, int]]]:
        transport = Held()
        recorded: list[list[tuple[float, int]]] = [[], []]
        await asyncio.gather(*(paced_exchange(transport, pacer, "http://h/", "h", "1.2.3.4", 1000, retries=0,
                                              backoff_s=0.0, sent=recorded[i]) for i in range(2)))  # fmt: skip
        return recorded

    recorded = asyncio.run(go())
    assert sends == [0.02, 0.27]
    assert len(recorded[0]) == len(recorded[1]) == 1
