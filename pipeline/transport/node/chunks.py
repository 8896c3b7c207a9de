"""A running batch's results made durable and reported in chunks, so that a killed node costs only its
requests in flight, not the finished part of its batch.

A finished result waits at most ``fleet.progress_s`` for its chunk to start (the clock starts at the oldest
result not yet in a chunk; the rest go at the batch's end): the results gathered since the last chunk are
written as one segment and their outcomes recorded in the store (``NodeSink.write_batch``), then a progress pack
(the chunk's slim results and its segment, no report) goes to the dispatcher; the last chunk rides in the
batch's one reply with the report. The store is written before the pack is sent, so a node killed in
between has still settled those URLs: the dispatcher's re-queue of the expired batch leaves URLs the store
shows settled (``pipeline.frontier.answered``). A chunk that cannot be stored is kept and tried again with
the next one; the last chunk is tried ``finish_tries`` times with back-off (a store or a file system that
refuses one write under load, as WebHDFS's APPEND right after a CREATE can); whatever is still unstored
then is handed back unfinished (the next holder fetches those URLs again: the price of a store that stays
away).

Runs on the node's fetch loop; ``write`` is the blocking sink call, run on the sink threads by the caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tenacity import AsyncRetrying, stop_after_attempt, wait_exponential

from fetchers.records import Batch, FetchResult, UrlTask
from pipeline.transport.node.sink import Receipt

log = logging.getLogger(__name__)

# (results, chunk number) -> the receipt of the stored chunk (raises when it could not be stored)
WriteChunk = Callable[[list[FetchResult], int], Awaitable[Receipt]]
# (results, segment) -> None: hand a progress pack to the outbox
SendChunk = Callable[[list[FetchResult], str], None]


@dataclass(slots=True)
class BatchChunks:
    batch: Batch
    write: WriteChunk
    send: SendChunk
    every_s: float
    finish_tries: int = 3
    finish_wait_s: float = 0.5  # the first back-off of the last chunk's tries (doubling)
    _held: list[FetchResult] = field(default_factory=list)
    _stored: set[int] = field(default_factory=set)
    _chunk: int = 0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _pending: asyncio.Event = field(default_factory=asyncio.Event)  # set while results wait for a chunk
    _oldest: float = 0.0  # when the oldest result not yet in a chunk arrived
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, result: FetchResult) -> None:
        if not self._held:
            self._oldest = self.clock()
            self._pending.set()
        self._held.append(result)

    async def tick_forever(self) -> None:
        """Until ``stop()``, write and report a chunk once its oldest result has waited ``every_s``: a
        result is durable within ``every_s`` plus one write (a fixed tick after each write would add the
        write's time to every wait, twice for a result that just missed one). A write under way when
        ``stop()`` comes is finished and reported first: cancelling it would leave its thread writing the
        chunk while ``finish`` wrote the same results again (two writers of one segment, and each URL's
        outcome counted twice in the store's totals, both having read it pending)."""
        while not self._stop.is_set():
            if not await self._unless_stopped(self._pending.wait()):
                return
            wait = self._oldest + self.every_s - self.clock()
            if wait > 0 and not await self._unless_stopped(self.sleep(wait)):
                return
            try:
                results, receipt = await self._store_held()
            except Exception:  # kept: tried again with the next chunk or at the end
                log.warning("batch %d: a chunk could not be stored yet; retrying", self.batch.serial, exc_info=True)
                await self._unless_stopped(self.sleep(self.every_s))
                continue
            if results:
                self.send(results, receipt.segment if receipt else "")

    def stop(self) -> None:
        """End ``tick_forever`` (after the write under way, if any); the rest goes with ``finish``."""
        self._stop.set()

    async def _unless_stopped(self, wait: Awaitable[object]) -> bool:
        """Await ``wait`` unless ``stop()`` comes first; False when stopped."""
        waiting = asyncio.ensure_future(wait)
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait((waiting, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (waiting, stopped):
                fut.cancel()
        return not self._stop.is_set()

    async def finish(self) -> tuple[list[FetchResult], Receipt | None, list[UrlTask]]:
        """The last chunk, stored: its results, its receipt (None when there was nothing left) and the
        batch's tasks that no stored chunk answered, when storing failed (they go back unfinished)."""
        try:
            async for attempt in AsyncRetrying(stop=stop_after_attempt(max(1, self.finish_tries)), reraise=True,
                                               wait=wait_exponential(multiplier=self.finish_wait_s)):  # fmt: skip
                with attempt:
                    results, receipt = await self._store_held()
            return results, receipt, []
        except Exception:
            log.exception("batch %d: storing its last chunk failed; handing its URLs back", self.batch.serial)
            self._held.clear()
            return [], None, [t for t in self.batch.tasks if t.url_id not in self._stored]

    async def _store_held(self) -> tuple[list[FetchResult], Receipt | None]:
        async with self._lock:  # chunks in order, one at a time
            results, self._held, oldest = self._held, [], self._oldest
            self._pending.clear()
            if not results:
                return [], None
            try:
                receipt = await self.write(results, self._chunk)
            except BaseException:
                self._held = results + self._held
                self._oldest = oldest
                self._pending.set()
                raise
            self._chunk += 1
            self._stored.update(r.url_id for r in results)
            return results, receipt
