"""RobotsCache with a RobotsShare (the fleet's nodes sharing robots.txt answers): a fresh shared answer saves the
fetch and expires by its age; a stale one is fetched again and replaced (and what changed is reported against it when this node had no answer
of its own); no-answer results stay local; a failing
share only costs the fetch it would have saved."""

from __future__ import annotations

import asyncio

from fetchers.robots import RobotsCache, SharedAnswer
from pipeline.settings import PolitenessSettings

ORIGIN = "http://a.test"
BODY = b"User-agent: *\nDisallow: /private/\n"


class Share:
    def __init__(self, *, fail: bool = False) -> None:
        self.rows: dict[str, SharedAnswer] = {}
        self.fail = fail
        self.puts = 0

    def get_robots(self, origin: str) -> SharedAnswer | None:
        if self.fail:
            raise OSError("thrift down")
        return self.rows.get(origin)

    def put_robots(self, origin: str, answer: SharedAnswer) -> None:
        if self.fail:
            raise OSError("thrift down")
        self.puts += 1
        self.rows[origin] = answer


class Fetch:
    def __init__(self, status: int = 200, body: bytes = BODY) -> None:
        self.calls = 0
        self.answer = (status, body)

    async def __call__(self, origin: str) -> tuple[int, bytes]:
        self.calls += 1
        return self.answer


def cache(share: Share, wall: float, mono: float = 50.0) -> RobotsCache:
    p = PolitenessSettings(robots_ttl_s=3600.0, robots_5xx_retry_s=600.0)
    return RobotsCache(p, agent="crawlfleet", clock=lambda: mono, share=share, wall=lambda: wall)


def test_a_fresh_shared_answer_saves_the_fetch_and_expires_by_its_age() -> None:
    share = Share()
    share.rows[ORIGIN] = SharedAnswer(200, BODY, fetched_at=10_000.0)
    c, fetch = cache(share, wall=10_000.0 + 600), Fetch()
    rules = asyncio.run(c.get(ORIGIN, fetch))
    assert fetch.calls == 0 and c.shared_hits == 1 and c.fetches == 0
    assert not rules.allows("http://a.test/private/x") and rules.allows("http://a.test/y")
    assert rules.expires == 50.0 + 3600 - 600  # the node's clock, less the answer's age


def test_a_stale_shared_answer_is_fetched_again_and_replaced() -> None:
    share = Share()
    share.rows[ORIGIN] = SharedAnswer(200, b"User-agent: *\nDisallow: /\n", fetched_at=0.0)
    c, fetch = cache(share, wall=10_000.0), Fetch()
    rules = asyncio.run(c.get(ORIGIN, fetch))
    assert fetch.calls == 1 and c.shared_hits == 0 and rules.allows("http://a.test/y")
    assert share.rows[ORIGIN] == SharedAnswer(200, BODY, 10_000.0)


def test_a_host_new_to_this_node_reports_a_change_against_the_shared_answer_it_replaced() -> None:
    share = Share()  # another node had the host and its answer; it changed since, and this node fetched it
    share.rows[ORIGIN] = SharedAnswer(200, b"User-agent: *\nDisallow: /\n", fetched_at=0.0)
    c = cache(share, wall=10_000.0)
    asyncio.run(c.get(ORIGIN, Fetch()))
    note = c.take_news(ORIGIN)
    assert note is not None and note.fetched and "+disallow: /private/" in note.changed and c.changes == 1
    first = cache(Share(), wall=10_000.0)  # nothing known before: a first load is no change
    asyncio.run(first.get(ORIGIN, Fetch()))
    note = first.take_news(ORIGIN)
    assert note is not None and note.changed == () and first.changes == 0


def test_a_shared_unreachable_answer_backs_off_for_its_own_retry_time() -> None:
    share = Share()
    share.rows[ORIGIN] = SharedAnswer(503, b"", fetched_at=10_000.0)
    fresh, fetch = cache(share, wall=10_000.0 + 100), Fetch()
    assert asyncio.run(fresh.get(ORIGIN, fetch)).unreachable and fetch.calls == 0
    late = cache(share, wall=10_000.0 + 700)  # past robots_5xx_retry_s: tried again
    assert asyncio.run(late.get(ORIGIN, fetch)).state == "parsed" and fetch.calls == 1


def test_no_answer_stays_local() -> None:
    share = Share()
    c = cache(share, wall=10_000.0)
    assert asyncio.run(c.get(ORIGIN, Fetch(status=0, body=b""))).unreachable
    assert share.puts == 0 and share.rows == {}


def test_a_failing_share_only_costs_the_fetch() -> None:
    c, fetch = cache(Share(fail=True), wall=10_000.0), Fetch()
    rules = asyncio.run(c.get(ORIGIN, fetch))
    assert fetch.calls == 1 and rules.state == "parsed"


def test_the_answer_is_in_the_share_before_any_request_of_this_process_can_use_it() -> None:
    """A page of the origin that starts while the put runs must not pass ``fresh`` and carry the load's note
    (its Sitemap: lines) to the crawl, which may hand the host's sitemap files to another process that then
    finds the share empty and fetches robots.txt again."""
    seen: list[tuple[bool, bool]] = []

    class SlowShare(Share):
        def put_robots(self, origin: str, answer: SharedAnswer) -> None:
            seen.append((c.fresh(origin) is not None, ORIGIN in c._news))
            super().put_robots(origin, answer)

    share = SlowShare()
    c = cache(share, wall=10_000.0)
    asyncio.run(c.get(ORIGIN, Fetch()))
    assert seen == [(False, False)] and share.puts == 1
    assert c.fresh(ORIGIN) is not None and c.take_news(ORIGIN) is not None
