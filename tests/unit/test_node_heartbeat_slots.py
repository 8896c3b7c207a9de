"""A fetch node's heartbeat q (S1's free slots): the fetchers batches use, not the start-up's warm-up.

Every node builds a fetcher for no scope when it starts (imports, DNS cache, session) and another for
the crawl's scope at its first batch. Counting the idle warm-up's slots too gave every node that had
served a batch twice the q of a node that had not, and a restarted node lost every choice to the others
(seen beside stress-ng: the restarted node got no batch in the crawl's last 4 s).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fetchers.engine import BACKLOG
from pipeline.settings import load_settings
from pipeline.transport.node.runtime import FetchRuntime
from pipeline.urls import Scope


class _Fetcher:
    def __init__(self, free: int) -> None:
        self.free_slots = free

    async def start(self) -> None:
        return None


def _runtime(frees: list[int]) -> FetchRuntime:
    made = iter(frees)

    def factory(settings: Any, node: str, scope: Any, shared: Any) -> _Fetcher:
        return _Fetcher(next(made))

    return FetchRuntime(load_settings(), node="n1", slots=8, factory=factory)  # type: ignore[arg-type]


def test_before_any_fetcher_q_is_what_one_will_have() -> None:
    rt = _runtime([])
    assert rt.heartbeat().free_slots == BACKLOG * rt.settings.fetch.concurrency


def test_the_warm_up_alone_counts_and_is_left_out_once_a_batch_has_its_fetcher() -> None:
    full = BACKLOG * load_settings().fetch.concurrency
    rt = _runtime([full, full - 40])
    asyncio.run(rt.fetchers.get(None, serve=False))  # the start-up's warm-up
    assert rt.heartbeat().free_slots == full  # a restarted node: as much as a fresh fetcher
    asyncio.run(rt.fetchers.get(Scope(frozenset({"a.test"}))))  # the crawl's scope, at the first batch
    assert rt.heartbeat().free_slots == full - 40  # not 2 x full - 40


def test_a_batch_with_no_scope_uses_the_warm_up_and_it_counts() -> None:
    full = BACKLOG * load_settings().fetch.concurrency
    rt = _runtime([full - 7])
    asyncio.run(rt.fetchers.get(None, serve=False))
    asyncio.run(rt.fetchers.get(None))
    assert rt.heartbeat().free_slots == full - 7


def test_a_node_serving_two_crawls_gives_each_the_q_of_its_own_fetcher() -> None:
    full = BACKLOG * load_settings().fetch.concurrency
    rt = _runtime([full, full - 40, full - 100])
    assert rt.heartbeat().free_by_service == {}  # before any batch: every crawl reads free_slots
    asyncio.run(rt.fetchers.get(None, serve=False))
    asyncio.run(rt.fetchers.get(Scope(frozenset({"a.test"})), service="crawl-a"))
    asyncio.run(rt.fetchers.get(Scope(frozenset({"b.test"})), service="crawl-b"))
    hb = rt.heartbeat()
    assert hb.free_slots == 2 * full - 140
    assert hb.free_by_service == {"crawl-a": full - 40, "crawl-b": full - 100, "": full}
    assert hb.free_for("crawl-b") == full - 100 and hb.free_for("crawl-c") == full
