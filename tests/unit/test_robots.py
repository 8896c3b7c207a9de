"""RobotsCache: status mapping (RFC 9309), group choice, Crawl-delay cap, expiry, joined fetches."""

from __future__ import annotations

import asyncio

from fetchers.robots import RobotsCache, origin_of
from pipeline.settings import PolitenessSettings

ROBOTS = b"""
User-agent: *
Disallow: /private/
Crawl-delay: 2

User-agent: crawlfleet-other
Disallow: /

User-agent: crawlfleet
Disallow: /agentonly/
Allow: /
Crawl-delay: 99

User-agent: otherbot
Disallow: /
"""


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _cache(clock: Clock) -> RobotsCache:
    p = PolitenessSettings(max_crawl_delay_s=30.0, robots_ttl_s=3600.0, robots_5xx_retry_s=600.0)
    return RobotsCache(p, agent="crawlfleet", clock=clock)


def test_group_choice_and_crawl_delay_cap() -> None:
    rules = _cache(Clock()).from_response(200, ROBOTS)
    assert rules.state == "parsed"
    assert rules.allows("http://a.test/private/1")  # only '*' disallows it; our group wins
    assert not rules.allows("http://a.test/agentonly/1")
    assert rules.allows("http://a.test/")
    assert rules.crawl_delay == 30.0  # 99 capped at max_crawl_delay_s


def test_star_group_when_no_own_group() -> None:
    rules = _cache(Clock()).from_response(200, b"User-agent: *\nDisallow: /x\nCrawl-delay: 0.5\n")
    assert not rules.allows("http://a.test/x/1") and rules.allows("http://a.test/y")
    assert rules.crawl_delay == 0.5
    rate = _cache(Clock()).from_response(200, b"User-agent: *\nRequest-rate: 1/4\n")
    assert rate.crawl_delay == 4.0


def test_status_mapping() -> None:
    c = _cache(Clock())
    for status in (401, 403, 404, 410, 310):
        r = c.from_response(status, b"")
        assert r.state == "allow_all" and r.allows("http://a.test/anything"), status
    for status in (0, 429, 500, 503):
        r = c.from_response(status, b"")
        assert r.unreachable and not r.allows("http://a.test/"), status


def test_garbage_and_bom() -> None:
    c = _cache(Clock())
    assert c.from_response(200, b"\xff\xfe\x00garbage\n\n").allows("http://a.test/")
    r = c.from_response(200, "\ufeffUser-agent: *\nDisallow: /\n".encode())
    assert not r.allows("http://a.test/x")


def test_expiry_and_joined_fetch() -> None:
    clock = Clock()
    cache = _cache(clock)
    calls: list[str] = []

    async def fetch(origin: str) -> tuple[int, bytes]:
        calls.append(origin)
        await asyncio.sleep(0.01)
        return 200, ROBOTS

    async def go() -> None:
        rules = await asyncio.gather(*(cache.get("http://a.test", fetch) for _ in range(20)))
        assert len(calls) == 1 and all(r is rules[0] for r in rules)
        assert cache.fresh("http://a.test") is rules[0]
        clock.t += 3599
        await cache.get("http://a.test", fetch)
        assert len(calls) == 1
        clock.t += 2
        assert cache.fresh("http://a.test") is None
        await cache.get("http://a.test", fetch)
        assert len(calls) == 2

    asyncio.run(go())


def test_unreachable_backoff_then_refetch() -> None:
    clock = Clock()
    cache = _cache(clock)
    answers = [(503, b""), (200, b"User-agent: *\nDisallow:\n")]

    async def fetch(origin: str) -> tuple[int, bytes]:
        return answers.pop(0)

    async def broken(origin: str) -> tuple[int, bytes]:
        raise RuntimeError("boom")

    async def go() -> None:
        r = await cache.get("http://b.test", fetch)
        assert r.unreachable and cache.remaining_block("http://b.test") == 600.0
        clock.t += 599
        assert (await cache.get("http://b.test", fetch)).unreachable
        clock.t += 2
        assert (await cache.get("http://b.test", fetch)).allows("http://b.test/x")
        assert (await cache.get("http://c.test", broken)).unreachable  # a failing fetch is 'unreachable'

    asyncio.run(go())


def test_bounded_entries() -> None:
    clock = Clock()
    cache = RobotsCache(PolitenessSettings(), agent="crawlfleet", clock=clock, max_entries=10)

    async def fetch(origin: str) -> tuple[int, bytes]:
        return 404, b""

    async def go() -> None:
        for i in range(50):
            await cache.get(f"http://h{i}.test", fetch)

    asyncio.run(go())
    assert len(cache._rules) <= 10 and cache.fresh("http://h49.test") is not None


def test_origin_of() -> None:
    assert origin_of("http://a.test:8080/x/y?z") == "http://a.test:8080"
    assert origin_of("https://a.test") == "https://a.test"


def test_x_robots_tag() -> None:
    from fetchers.robots import x_robots_tag

    assert x_robots_tag("noindex", "crawlfleet") == (True, False)
    assert x_robots_tag("NoIndex, NOFOLLOW", "crawlfleet") == (True, True)
    assert x_robots_tag("none", "crawlfleet") == (True, True)
    assert x_robots_tag("googlebot: noindex, nofollow", "crawlfleet") == (False, False)
    assert x_robots_tag("crawlfleet: nofollow", "crawlfleet") == (False, True)
    assert x_robots_tag("googlebot: noindex\nnofollow", "crawlfleet") == (False, True)
    assert x_robots_tag("unavailable_after: 25 Jun 2010 15:00:00 PST, noarchive", "crawlfleet") == (False, False)
