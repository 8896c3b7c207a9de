"""The worker's lease fence (pipeline/transport/node/lease.py) and the engine's use of it (fetchers/engine.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from fetchers.engine import Engine
from fetchers.exchange import Exchange
from fetchers.guard import GuardedResolver
from fetchers.records import Batch, FetchResult, UrlTask
from fetchers.report import LEASE_LAPSED, RETRY_LATER
from pipeline.settings import Settings
from pipeline.transport.node.lease import LeaseGuard


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_regular_heartbeats_hold_the_lease() -> None:
    clock = Clock()
    guard = LeaseGuard(limit_s=1.0, monotonic=clock)
    fence = guard.fence()
    for _ in range(20):
        clock.t += 0.9
        guard.beat()
        assert fence()
    assert guard.lapses == 0


def test_a_gap_lapses_batches_started_before_it_only() -> None:
    clock = Clock()
    guard = LeaseGuard(limit_s=1.0, monotonic=clock)
    before = guard.fence()
    clock.t += 2.5  # stopped: no heartbeat for 2.5 s
    guard.beat()  # the publishing thread ran first after the stop
    assert not before()
    after = guard.fence()  # a batch that starts now holds the new epoch
    clock.t += 0.5
    guard.beat()
    assert after() and not before()
    assert guard.lapses == 1


def test_the_fetch_thread_sees_the_gap_before_the_next_heartbeat() -> None:
    clock = Clock()
    guard = LeaseGuard(limit_s=1.0, monotonic=clock)
    fence = guard.fence()
    clock.t += 1.5
    assert not fence()  # no beat yet: the loop thread woke first
    guard.beat()  # the late heartbeat does not restore the old batch's lease
    assert not fence()
    assert guard.lapses == 1


def test_a_batch_starting_right_after_a_lapse_is_fenced_from_the_start() -> None:
    clock = Clock()
    guard = LeaseGuard(limit_s=1.0, quarantine_s=0.5, monotonic=clock)
    clock.t += 2.0  # stopped; a batch waited in our prefetch meanwhile
    assert not guard.fence()()  # it starts first thing after the stop
    clock.t += 0.6
    guard.beat()
    assert guard.fence()()  # later batches are ours to fetch


def test_limit_leaves_margin_before_the_dispatcher_expires() -> None:
    g = LeaseGuard.for_heartbeats(heartbeat_s=2.0, missed=2)
    assert 2.0 < g.limit_s < 4.0
    g = LeaseGuard.for_heartbeats(heartbeat_s=0.5, missed=2)
    assert 0.5 < g.limit_s < 1.0


class _Pages:
    """A transport that serves every page and counts the requests (robots.txt: 404, allow all)."""

    def __init__(self) -> None:
        self.fetched: list[str] = []

    async def exchange(self, url: str, host: str, ip: str, *, max_body: int) -> Exchange:
        if url.endswith("/robots.txt"):
            return Exchange(status=404, ip=ip)
        self.fetched.append(url)
        await asyncio.sleep(0)
        return Exchange(status=200, content_type="text/plain", body=b"x", ip=ip)


class _NoDns:
    async def resolve(self, host: str, port: int = 0, family: Any = 0) -> list[Any]:
        raise AssertionError("IP literals only")

    async def close(self) -> None:
        return None


def test_engine_hands_back_urls_once_the_fence_drops() -> None:
    base = Settings()
    settings = dataclasses.replace(
        base, politeness=dataclasses.replace(base.politeness, min_host_delay_s=0.0, per_host_concurrency=1)
    )
    transport = _Pages()
    engine = Engine(settings, fetcher_id="f", transport=transport, clock=lambda: 0.0, scope=None,
                    resolver=GuardedResolver(_NoDns(), allow_networks=["127.0.0.0/8"]))  # type: ignore[arg-type]  # fmt: skip
    tasks = [UrlTask(f"http://127.0.0.1:1/p{i}", i, 0) for i in range(6)]
    results: list[FetchResult] = []
    holds = [True]

    def on_result(res: FetchResult) -> None:
        results.append(res)
        if len(results) == 2:
            holds[0] = False  # the lease lapses after the second page

    report = asyncio.run(engine.run_batch(Batch(1, "f", tasks), on_result, fence=lambda: holds[0]))
    assert transport.fetched == ["http://127.0.0.1:1/p0", "http://127.0.0.1:1/p1"]
    assert [r.error_class for r in results] == ["", ""] + [LEASE_LAPSED] * 4
    assert LEASE_LAPSED in RETRY_LATER
    assert [t.url_id for t in report.unfinished] == [2, 3, 4, 5] and report.pages == 2


class _Fails:
    """A transport whose pages answer 500 (robots.txt: 404); the fence drops after the first page ask."""

    def __init__(self, holds: list[bool]) -> None:
        self.asked: list[str] = []
        self.holds = holds

    async def exchange(self, url: str, host: str, ip: str, *, max_body: int) -> Exchange:
        if url.endswith("/robots.txt"):
            return Exchange(status=404, ip=ip)
        self.asked.append(url)
        self.holds[0] = False  # the lease lapses while the server answers
        return Exchange(status=500, content_type="text/plain", body=b"down", ip=ip)


def test_a_url_fenced_between_its_retries_keeps_the_answer_it_got() -> None:
    """A broker stall that fences a batch in the middle of a 500's retries: the URL was asked and
    answered, so its outcome is that answer (retry budget cut short), not an unfinished URL that the next
    node would ask the whole budget again."""
    base = Settings()
    settings = dataclasses.replace(
        base, politeness=dataclasses.replace(base.politeness, min_host_delay_s=0.0, per_host_concurrency=1),
        fetch=dataclasses.replace(base.fetch, retries=2, retry_backoff_s=0.0),
    )  # fmt: skip
    holds = [True]
    transport = _Fails(holds)
    engine = Engine(settings, fetcher_id="f", transport=transport, clock=lambda: 0.0, scope=None,
                    resolver=GuardedResolver(_NoDns(), allow_networks=["127.0.0.0/8"]))  # type: ignore[arg-type]  # fmt: skip
    tasks = [UrlTask("http://127.0.0.1:1/e0", 0, 0), UrlTask("http://127.0.0.1:1/e1", 1, 0)]
    results: list[FetchResult] = []
    report = asyncio.run(engine.run_batch(Batch(1, "f", tasks), results.append, fence=lambda: holds[0]))
    assert transport.asked == ["http://127.0.0.1:1/e0"]  # one ask, no retry after the fence dropped
    assert [(r.url, r.status, r.error_class) for r in results] == [
        ("http://127.0.0.1:1/e0", 500, ""), ("http://127.0.0.1:1/e1", 0, LEASE_LAPSED)]  # fmt: skip
    assert [t.url_id for t in report.unfinished] == [1]
