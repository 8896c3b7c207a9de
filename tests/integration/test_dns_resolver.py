"""The DNS layer against real servers on loopback: the test bed's zone server, unbound in front of it.

Clocks are injected (FakeClock) so TTL and refresh behaviour is checked without sleeping; query
counts come from the resolver's stats (queries handed to c-ares, whose own cache is disabled).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
import pytest

from pipeline.dns.aiohttp_resolver import AiohttpResolver, DnsLookupError
from pipeline.dns.blocking import UdpBlockingResolver
from pipeline.dns.cache_resolver import CachingResolver
from pipeline.dns.errors import DnsError
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.model import ip_for_host
from pipeline.settings import DnsSettings
from tests.fixtures.dns import UNBOUND_MAX_TTL_S, UNBOUND_MIN_TTL_S, FakeClock

pytestmark = pytest.mark.integration

def run_async(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test in a fresh event loop (the suite has no asyncio plugin)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper

BASE = DnsSettings(timeout_s=0.3, tries=2, min_ttl_s=60, max_ttl_s=3600, refresh_period_s=0,
                   negative_ttl_s=300, negative_capacity=10_000, cache_size=1000)


def make(server: str, clock: FakeClock, **changes: object) -> CachingResolver:
    settings = dataclasses.replace(BASE, servers=(server,), **changes)  # type: ignore[arg-type]
    return CachingResolver.from_settings(settings, clock=clock)


@run_async
async def test_site_address_and_clamped_ttl(dns_testbed: TestbedProcess) -> None:
    clock = FakeClock()
    r = make(dns_testbed.dns_server, clock)
    web = dns_testbed.web
    for i in range(3):
        assert await r.resolve(f"site{i}.crawl.test") == [ip_for_host(i, web.hosts)]
        cached = r.cached(f"site{i}.crawl.test")
        assert cached is not None
        assert cached[2] == max(60, min(web.ttl(i), 3600))  # whole minutes; testbed TTLs are
    assert r.stats().queries_sent == 3
    assert await r.resolve("SITE0.crawl.test.") == [ip_for_host(0, web.hosts)]  # normalized: a hit
    assert r.stats().hits == 1 and r.stats().queries_sent == 3
    await r.aclose()


@run_async
async def test_ttl_clamping_short_and_long(dns_testbed: TestbedProcess) -> None:
    clock = FakeClock()
    r = make(dns_testbed.dns_server, clock)  # plain TTL mode, clamp to [60, 3600]
    await r.resolve("shortttl.crawl.test")  # TTL 1 -> 60
    await r.resolve("longttl.crawl.test")  # TTL 7 days -> 3600
    assert r.stats().queries_sent == 2
    clock.advance(59)
    await r.resolve("shortttl.crawl.test")
    assert r.stats().queries_sent == 2  # lengthened: still cached after 59 s
    clock.advance(2)
    await r.resolve("shortttl.crawl.test")
    assert r.stats().queries_sent == 3  # expired at 60 s
    clock.advance(3600 - 61 - 1)
    await r.resolve("longttl.crawl.test")
    assert r.stats().queries_sent == 3
    clock.advance(2)
    await r.resolve("longttl.crawl.test")
    assert r.stats().queries_sent == 4  # shortened: re-asked after an hour, not a week
    await r.aclose()


@run_async
async def test_refresh_rule(dns_testbed: TestbedProcess) -> None:
    clock = FakeClock()
    r = make(dns_testbed.dns_server, clock, refresh_period_s=100)
    ip = [ip_for_host(1, dns_testbed.web.hosts)]
    assert await r.resolve("shortttl.crawl.test") == ["127.0.10.1"]
    assert await r.resolve("site1.crawl.test") == ip
    clock.advance(90)  # far past both TTLs (1 s -> 60 s clamped), inside the refresh period
    assert await r.resolve("shortttl.crawl.test") == ["127.0.10.1"]
    assert r.stats().queries_sent == 2 and r.stats().refreshes == 0
    clock.advance(20)  # past the period: served stale once, refreshed in the background
    assert await r.resolve("site1.crawl.test") == ip
    s = r.stats()
    assert s.refreshes == 1 and s.stale_served == 1
    await r.drain()
    assert r.stats().queries_sent == 3
    cached = r.cached("site1.crawl.test")
    assert cached is not None and cached[1] < 1  # the refresh reset its age
    assert await r.resolve("site1.crawl.test") == ip
    assert r.stats().queries_sent == 3  # fresh again
    clock.advance(100 + 60)  # shortttl untouched for period + TTL: expired, resolved in the foreground
    assert await r.resolve("shortttl.crawl.test") == ["127.0.10.1"]
    s = r.stats()
    assert s.queries_sent == 4 and s.refreshes == 1
    await r.aclose()


@run_async
async def test_negative_cache_expiry(dns_testbed: TestbedProcess) -> None:
    clock = FakeClock()
    r = make(dns_testbed.dns_server, clock)
    with pytest.raises(DnsError) as first:
        await r.resolve("nowhere.crawl.test")
    assert first.value.kind == "nxdomain" and not first.value.cached
    with pytest.raises(DnsError) as second:
        await r.resolve("nowhere.crawl.test")
    assert second.value.kind == "nxdomain" and second.value.cached
    assert r.stats().queries_sent == 1 and r.stats().negative_hits == 1
    clock.advance(300)  # the whole Bloom filter is cleared
    with pytest.raises(DnsError) as third:
        await r.resolve("nowhere.crawl.test")
    assert not third.value.cached
    assert r.stats().queries_sent == 2
    await r.aclose()


@run_async
async def test_inflight_join_sends_one_query(dns_testbed: TestbedProcess) -> None:
    r = make(dns_testbed.dns_server, FakeClock(), timeout_s=5.0)
    results = await asyncio.gather(*(r.resolve("slow.crawl.test") for _ in range(100)))
    assert all(res == ["127.0.10.1"] for res in results)
    s = r.stats()
    assert s.queries_sent == 1 and s.inflight_joins == 99 and s.misses == 100
    await r.aclose()


@run_async
async def test_cancelled_caller_does_not_cancel_the_shared_query(dns_testbed: TestbedProcess) -> None:
    r = make(dns_testbed.dns_server, FakeClock(), timeout_s=5.0)
    first = asyncio.ensure_future(r.resolve("slow.crawl.test"))
    second = asyncio.ensure_future(r.resolve("slow.crawl.test"))
    await asyncio.sleep(0.05)
    first.cancel()
    assert await second == ["127.0.10.1"]
    assert r.stats().queries_sent == 1
    await r.aclose()


@pytest.mark.parametrize(
    ("name", "kind"),
    [("garbage.crawl.test", "malformed"), ("servfail.crawl.test", "servfail"), ("silent.crawl.test", "timeout")],
)
@run_async
async def test_bad_answers_give_clean_errors(dns_testbed: TestbedProcess, name: str, kind: str) -> None:
    r = make(dns_testbed.dns_server, FakeClock())
    with pytest.raises(DnsError) as err:
        await r.resolve(name)
    assert err.value.kind == kind
    assert await r.resolve("site0.crawl.test")  # the resolver survives
    await r.aclose()


@run_async
async def test_truncated_answer_falls_back_to_tcp(dns_testbed: TestbedProcess) -> None:
    r = make(dns_testbed.dns_server, FakeClock())
    assert await r.resolve("truncated.crawl.test") == ["127.0.10.1"]
    await r.aclose()


@run_async
async def test_ipv6(dns_testbed: TestbedProcess) -> None:
    r = make(dns_testbed.dns_server, FakeClock())
    assert await r.resolve("v6.crawl.test", family=socket.AF_INET6) == ["::1"]
    assert await r.resolve("v6.crawl.test", family=socket.AF_INET6) == ["::1"]
    assert r.stats().hits == 1
    assert r.count_names("test", family=socket.AF_INET6) == 1
    with pytest.raises(DnsError) as err:
        await r.resolve("site0.crawl.test", family=socket.AF_INET6)
    assert err.value.kind == "no_address"
    assert await r.resolve("v6.crawl.test", family=socket.AF_UNSPEC) == ["127.0.10.1"]
    assert await r.resolve("[::1]") == ["::1"] and await r.resolve("127.0.0.9") == ["127.0.0.9"]
    await r.aclose()


@run_async
async def test_prefix_count_over_cached_names(dns_testbed: TestbedProcess) -> None:
    r = make(dns_testbed.dns_server, FakeClock())
    for i in range(4):
        await r.resolve(f"site{i}.crawl.test")
    assert r.count_names("test") == 4
    assert r.count_names("test", "crawl") == 4
    assert r.count_names("com") == 0
    await r.aclose()


@run_async
async def test_blocking_udp_resolver_same_interface(dns_testbed: TestbedProcess) -> None:
    upstream = UdpBlockingResolver(dns_testbed.dns_server, timeout_s=0.3, tries=2)
    r = CachingResolver.from_settings(BASE, clock=FakeClock(), upstream=upstream)
    assert await r.resolve("site2.crawl.test") == [ip_for_host(2, dns_testbed.web.hosts)]
    with pytest.raises(DnsError) as err:
        await r.resolve("nowhere2.crawl.test")
    assert err.value.kind == "nxdomain"
    assert await r.resolve("v6.crawl.test", family=socket.AF_INET6) == ["::1"]
    await r.aclose()


@run_async
async def test_aiohttp_fetch_through_our_resolver(dns_testbed: TestbedProcess) -> None:
    r = make(dns_testbed.dns_server, FakeClock())
    connector = aiohttp.TCPConnector(resolver=AiohttpResolver(r), use_dns_cache=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.get(f"http://site0.crawl.test:{dns_testbed.port}/") as resp:
            assert resp.status == 200
        with pytest.raises(aiohttp.ClientConnectorDNSError) as err:
            await session.get(f"http://nowhere3.crawl.test:{dns_testbed.port}/")
        assert isinstance(err.value.os_error, DnsLookupError)
        assert err.value.os_error.kind == "nxdomain"
    assert r.stats().misses == 2
    await r.aclose()


@run_async
async def test_one_resolver_serves_successive_event_loops(dns_testbed: TestbedProcess) -> None:
    r = make(dns_testbed.dns_server, FakeClock())

    def in_new_loop(name: str) -> list[str]:
        return asyncio.run(r.resolve(name))

    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, in_new_loop, "site3.crawl.test")
    assert await loop.run_in_executor(None, in_new_loop, "site4.crawl.test")
    assert r.stats().queries_sent == 2


# -- the fleet tier: our resolver -> unbound -> the zone server ------------------------------------


@run_async
async def test_unbound_tier_resolves_and_clamps(unbound: str, dns_testbed: TestbedProcess) -> None:
    clock = FakeClock()
    r = make(unbound, clock, min_ttl_s=1, max_ttl_s=10**6)  # let unbound's clamps show through
    assert await r.resolve("site0.crawl.test") == [ip_for_host(0, dns_testbed.web.hosts)]
    await r.resolve("shortttl.crawl.test")
    await r.resolve("longttl.crawl.test")
    short, long_ = r.cached("shortttl.crawl.test"), r.cached("longttl.crawl.test")
    assert short is not None and long_ is not None
    assert short[2] >= UNBOUND_MIN_TTL_S  # TTL 1 lengthened by unbound's cache-min-ttl
    assert long_[2] <= UNBOUND_MAX_TTL_S  # 7 days shortened by cache-max-ttl
    with pytest.raises(DnsError) as err:
        await r.resolve("nowhere4.crawl.test")
    assert err.value.kind == "nxdomain"
    with pytest.raises(DnsError) as outside:
        await r.resolve("example.com")  # the fleet tier never leaves the machine
    assert outside.value.kind == "refused"
    assert await r.resolve("v6.crawl.test", family=socket.AF_INET6) == ["::1"]
    await r.aclose()


@run_async
async def test_unbound_tier_inflight_join_and_errors(unbound: str) -> None:
    r = make(unbound, FakeClock(), timeout_s=5.0)
    results = await asyncio.gather(*(r.resolve("site4.crawl.test") for _ in range(100)))
    assert len({tuple(x) for x in results}) == 1
    assert r.stats().queries_sent == 1
    with pytest.raises(DnsError) as err:
        await r.resolve("servfail.crawl.test")
    assert err.value.kind == "servfail"
    with pytest.raises(DnsError) as bad:
        await r.resolve("garbage.crawl.test")  # unbound turns the junk upstream reply into SERVFAIL
    assert bad.value.kind == "servfail"
    await r.aclose()
