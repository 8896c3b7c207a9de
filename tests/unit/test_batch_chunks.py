"""A running batch's results stored and reported in chunks (``pipeline.transport.node.chunks``): a chunk
per tick while the batch runs, the rest at its end, a chunk that failed to store kept for the next, and the
URLs no stored chunk answered handed back when the last chunk cannot be stored."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from fetchers.records import Batch, FetchResult, UrlTask
from pipeline.transport.node.chunks import BatchChunks
from pipeline.transport.node.sink import Receipt
from pipeline.urls import fingerprint

URLS = [f"http://h.test/{i}" for i in range(5)]
BATCH = Batch(3, "n#0", [UrlTask(u, fingerprint(u), 0) for u in URLS], service="s", issued_at=1.0)


def res(url: str) -> FetchResult:
    return FetchResult(url=url, url_id=fingerprint(url), depth=0, final_url=url, status=200, serial=3)


def test_chunks_while_running_then_the_rest_at_the_end() -> None:
    stored: list[tuple[int, list[str]]] = []
    sent: list[tuple[list[str], str]] = []

    async def write(results: list[FetchResult], chunk: int) -> Receipt:
        stored.append((chunk, [r.url for r in results]))
        return Receipt(f"s3://b/n/{chunk}.jsonl", len(results))

    async def main() -> tuple[list[FetchResult], Receipt | None, list[UrlTask]]:
        chunks = BatchChunks(BATCH, write, lambda rs, seg: sent.append(([r.url for r in rs], seg)), every_s=0.01)
        ticker = asyncio.create_task(chunks.tick_forever())
        chunks.add(res(URLS[0]))
        chunks.add(res(URLS[1]))
        await asyncio.sleep(0.05)  # a tick stores and reports those two
        chunks.add(res(URLS[2]))
        chunks.stop()
        await ticker
        return await chunks.finish()

    last, receipt, unstored = asyncio.run(main())
    assert stored == [(0, URLS[:2]), (1, URLS[2:3])]
    assert sent == [(URLS[:2], "s3://b/n/0.jsonl")]
    assert [r.url for r in last] == URLS[2:3] and receipt is not None and receipt.segment.endswith("1.jsonl")
    assert unstored == []


def test_a_failed_chunk_is_kept_and_a_failed_end_hands_back_only_the_unstored() -> None:
    calls = {"n": 0}

    async def write(results: list[FetchResult], chunk: int) -> Receipt:
        calls["n"] += 1
        if calls["n"] == 1 or calls["n"] >= 3:  # the first tick fails, the second succeeds, the end fails
            raise OSError("store away")
        return Receipt(f"/s/{chunk}", len(results))

    async def main() -> tuple[list[FetchResult], Receipt | None, list[UrlTask]]:
        chunks = BatchChunks(BATCH, write, lambda _rs, _seg: None, every_s=10, finish_wait_s=0.0)
        chunks.add(res(URLS[0]))
        with contextlib.suppress(OSError):
            await chunks._store_held()
        chunks.add(res(URLS[1]))
        results, _ = await chunks._store_held()  # the kept result goes with the next chunk
        assert [r.url for r in results] == URLS[:2]
        chunks.add(res(URLS[2]))
        return await chunks.finish()

    last, receipt, unstored = asyncio.run(main())
    assert last == [] and receipt is None
    assert [t.url for t in unstored] == URLS[2:]  # the URLs no stored chunk answered
    assert calls["n"] == 2 + 3  # the last chunk was tried three times


def test_the_last_chunk_is_tried_again_before_its_urls_are_handed_back() -> None:
    """A write refused once at the end (WebHDFS's APPEND right after a CREATE answered 404 on a loaded
    machine): tried again, stored, nothing handed back to be fetched twice."""
    calls = {"n": 0}

    async def write(results: list[FetchResult], chunk: int) -> Receipt:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("404 on APPEND")
        return Receipt(f"/s/{chunk}", len(results))

    async def main() -> tuple[list[FetchResult], Receipt | None, list[UrlTask]]:
        chunks = BatchChunks(BATCH, write, lambda _rs, _seg: None, every_s=10, finish_wait_s=0.0)
        for u in URLS:
            chunks.add(res(u))
        return await chunks.finish()

    last, receipt, unstored = asyncio.run(main())
    assert [r.url for r in last] == URLS and receipt is not None and unstored == []
    assert calls["n"] == 2


def test_a_result_waits_at_most_every_s_for_its_chunk_even_behind_a_slow_write() -> None:
    """The wait is timed from the oldest result not yet in a chunk, not from the end of the last write: a
    result that arrives during a slow write is written ``every_s`` after it arrived (a fixed tick after
    each write would start its chunk ``every_s`` after the write ended, 0.9 s after it arrived here)."""
    now = [0.0]
    added: dict[str, float] = {}
    waited: list[tuple[str, float]] = []

    async def sleep(s: float) -> None:  # the ticker's only clock: a sleep moves the time on
        now[0] += s
        await asyncio.sleep(0)

    def add(chunks: BatchChunks, url: str) -> None:
        added[url] = now[0]
        chunks.add(res(url))

    async def main() -> None:
        done = asyncio.Event()

        async def write(results: list[FetchResult], chunk: int) -> Receipt:
            waited.extend((r.url, now[0] - added[r.url]) for r in results)
            if chunk == 0:
                add(chunks, URLS[1])  # arrives while this chunk is being written
                now[0] += 0.4  # a slow write
            else:
                done.set()
            return Receipt(f"/s/{chunk}", len(results))

        chunks = BatchChunks(BATCH, write, lambda _rs, _seg: None, every_s=0.5, clock=lambda: now[0], sleep=sleep)
        add(chunks, URLS[0])
        ticker = asyncio.create_task(chunks.tick_forever())
        await asyncio.wait_for(done.wait(), 5)
        chunks.stop()
        await ticker

    asyncio.run(main())
    assert [u for u, _ in waited] == URLS[:2]
    assert [w for _, w in waited] == pytest.approx([0.5, 0.5])


def test_a_batch_that_ends_during_a_chunks_write_waits_for_it_and_writes_nothing_twice() -> None:
    """The batch ends while a chunk is being written (on the sink's thread): the write is finished and
    reported, and the last chunk holds only what came after it. (Cancelling the ticker there left the
    thread writing while the end wrote the same results again: a CI run saw one segment written twice
    and the store's pending count go negative, each of those URLs counted done twice.)"""
    stored: list[list[str]] = []
    sent: list[list[str]] = []

    async def main() -> tuple[list[FetchResult], Receipt | None, list[UrlTask]]:
        writing, release = asyncio.Event(), asyncio.Event()

        async def write(results: list[FetchResult], chunk: int) -> Receipt:
            if chunk == 0:
                writing.set()
                await release.wait()  # a slow write, under way when the batch ends
            stored.append([r.url for r in results])
            return Receipt(f"/s/{chunk}", len(results))

        chunks = BatchChunks(BATCH, write, lambda rs, _seg: sent.append([r.url for r in rs]), every_s=0.01)
        ticker = asyncio.create_task(chunks.tick_forever())
        chunks.add(res(URLS[0]))
        chunks.add(res(URLS[1]))
        await asyncio.wait_for(writing.wait(), 5)
        chunks.add(res(URLS[2]))  # arrives during the write
        chunks.stop()  # the batch ended
        asyncio.get_running_loop().call_later(0.05, release.set)
        await asyncio.wait_for(ticker, 5)
        return await chunks.finish()

    last, receipt, unstored = asyncio.run(main())
    assert stored == [URLS[:2], URLS[2:3]]  # each result written once
    assert sent == [URLS[:2]]  # the chunk under way was reported; the rest rides in the reply
    assert [r.url for r in last] == URLS[2:3] and receipt is not None and unstored == []
