"""The robots share beside a SQLite crawl db (pipeline.storage.sqlite_robots): what one process puts, another
reads through its own connection; the newest answer wins; bodies are cut at MAX_ROBOTS_BYTES; a RobotsCache
over it saves the second process's fetch."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fetchers.robots import MAX_ROBOTS_BYTES, RobotsCache, SharedAnswer
from pipeline.settings import PolitenessSettings
from pipeline.storage.sqlite_robots import SqliteRobotsShare, open_share, share_path

ORIGIN = "http://a.test:8080"
BODY = b"User-agent: *\nDisallow: /private/\n"


def test_answers_cross_connections_and_the_newest_wins(tmp_path: Path) -> None:
    (tmp_path / "crawl.db").touch()
    path = share_path(tmp_path)
    assert path == tmp_path / "crawl.db.robots" and share_path(tmp_path / "crawl.db") == path
    one, two = SqliteRobotsShare(path), SqliteRobotsShare(path)
    try:
        assert two.get_robots(ORIGIN) is None
        one.put_robots(ORIGIN, SharedAnswer(200, BODY, 100.0))
        assert two.get_robots(ORIGIN) == SharedAnswer(200, BODY, 100.0)
        two.put_robots(ORIGIN, SharedAnswer(404, b"x" * (MAX_ROBOTS_BYTES + 10), 200.0))
        got = one.get_robots(ORIGIN)
        assert got is not None and (got.status, len(got.body), got.fetched_at) == (404, MAX_ROBOTS_BYTES, 200.0)
    finally:
        one.close()
        two.close()


def test_open_share_is_for_sqlite_specs_only(tmp_path: Path) -> None:
    share = open_share(f"sqlite:{tmp_path / 'crawl.db'}")
    assert share is not None and share.path == tmp_path / "crawl.db.robots"
    share.close()
    assert open_share("hbase://127.0.0.1:9090/x") is None


def test_a_second_process_cache_takes_the_answer_instead_of_fetching(tmp_path: Path) -> None:
    fetches: list[str] = []

    async def fetch(origin: str) -> tuple[int, bytes]:
        fetches.append(origin)
        return 200, BODY

    p = PolitenessSettings(robots_ttl_s=3600.0)
    shares = [SqliteRobotsShare(share_path(tmp_path / "crawl.db")) for _ in range(2)]
    try:
        first, second = (RobotsCache(p, agent="crawlfleet", share=s, wall=lambda: 1_000.0) for s in shares)
        asyncio.run(first.get(ORIGIN, fetch))
        rules = asyncio.run(second.get(ORIGIN, fetch))
    finally:
        for s in shares:
            s.close()
    assert fetches == [ORIGIN] and second.shared_hits == 1
    assert not rules.allows(f"{ORIGIN}/private/x") and rules.allows(f"{ORIGIN}/y")
