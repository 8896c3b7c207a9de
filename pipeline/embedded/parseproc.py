"""Parse processes for the embedded crawl: link extraction and the journal line on another CPU core.

The in-process crawl fetches, parses and records every page on one core, so a 2-core machine leaves
its second core nearly idle. Of the crawl's CPU per page, about a third is work that needs no crawl
state: extracting and filtering the page's links and building its journal line (``pipeline.links.prepare``).
``ParsePool`` ships exactly that to child processes, and the crawl's process keeps the fetching, the
journal write, the seen-set, the frontier and the store. (``pipeline.embedded.fetchproc`` splits the other
way, fetching in the children; on two cores that leaves the halves unbalanced, see docs/bench/local.md.)

Guarantees, on which ``CrawlCore``'s exactly-once rules rely:
* every submitted result is delivered exactly once, to the callback it was submitted with, in this
  process, on this loop. The parent keeps each result until it is delivered: if a child dies, errs
  or is slow, the result is delivered unprepared (the core then prepares it itself), never dropped;
* ``defer``'d callbacks and ``barrier`` futures run only after every result submitted before them was
  delivered, so a batch's hosts are released, and the batch closed, only after its results are in
  the core (``ParsedFetcher``).
A result waits in a child for a few milliseconds before it is journaled; a crash in that window
re-fetches it on resume, as for any request in flight at a crash.

Results go to a child whenever one is ready; the running batches bound how many are out (about a
thousand). ``MAX_OUTSTANDING`` is only a memory guard past which the crawl's process prepares results
itself: doing so whenever a child lags would lengthen this process's loop turns, which delays reading
the children's answers, which makes them lag more (measured: with a cap of 256, 70% of the pages ended
up prepared here).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from fetchers.protocol import Fetcher
from fetchers.records import Batch, FetchResult, Prepared
from fetchers.report import BatchReport
from pipeline.embedded.parsechild import ChildProcess, Pipe
from pipeline.links.prepare import followable
from pipeline.settings import Settings

log = logging.getLogger(__name__)

MAX_OUTSTANDING = 2048  # results in the children at once; past it, prepare here (a memory guard)
_MAX_RESTARTS = 3
STALL_S = 10.0  # a child holding a result this long is replaced (see ParsePool._watch)


def parse_processes_for(settings: Settings, *, fetch_processes: int) -> int:
    """Parse processes for the embedded crawl: ``fetch.parse_processes``, or, when negative, one per
    spare core (at most two: past that the crawl's own process is the bottleneck). None when fetch
    processes run: they prepare their results themselves."""
    if fetch_processes > 0:
        return 0
    wanted = settings.fetch.parse_processes
    if wanted >= 0:
        return wanted
    return max(0, min(2, (os.cpu_count() or 1) - 1))


@dataclass(slots=True)
class _Waiting:
    result: FetchResult
    deliver: Callable[[FetchResult], None]
    child: int
    sent_at: float


class ParsePool:
    """The parent's side of the parse processes. Use from one event loop."""

    def __init__(
        self, settings: Settings, *, processes: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._children: list[ChildProcess] = [ChildProcess(i) for i in range(processes)]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seq = 0
        self._waiting: dict[int, _Waiting] = {}  # seq -> result in a child; insertion order = seq order
        self._deferred: collections.deque[tuple[int, Callable[[], None]]] = collections.deque()
        self._next_child = 0
        self._flush_scheduled = False
        self._closing = False
        self._restarting: set[asyncio.Task[None]] = set()  # held so that the loop does not drop them
        self.offloaded = 0  # results prepared by a child
        self.local = 0  # results delivered as they came (not parseable, or no child free)

    def launch(self) -> None:
        """Start the children now: they import their modules while the crawl opens its store."""
        for child in self._children:
            child.launch()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for child in self._children:
            await self._start_child(child)
        self._loop.call_later(1.0, self._watch)

    async def _start_child(self, child: ChildProcess) -> None:
        """Connect to a launched child (launching it first after a death). Never raises: a child that
        cannot be started leaves its share to the others, or to this process."""
        if child.sock is None:
            if child.restarts > _MAX_RESTARTS or self._closing:
                return
            child.launch()
        assert self._loop is not None and child.sock is not None
        try:
            _, proto = await self._loop.create_unix_connection(
                lambda: Pipe(lambda msg: self._received(child, msg), lambda: self._died(child)), sock=child.sock
            )
        except OSError:
            log.exception("parse process %d: no pipe", child.index)
            child.close()
            return
        child.pipe = proto
        proto.send(self.settings)

    # --- submitting --------------------------------------------------------------------------------
    def submit(self, result: FetchResult, deliver: Callable[[FetchResult], None]) -> None:
        """Deliver ``result`` to ``deliver``, prepared by a child when one is free, else at once."""
        child = self._pick()
        if child is None or not followable(result, self.settings):
            self.local += 1
            deliver(result)
            return
        self._seq += 1
        self._waiting[self._seq] = _Waiting(result, deliver, child.index, self.clock())
        child.outbox.append((self._seq, result))
        self.offloaded += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _pick(self) -> ChildProcess | None:
        if len(self._waiting) >= MAX_OUTSTANDING:
            return None
        n = len(self._children)
        for k in range(n):
            child = self._children[(self._next_child + k) % n]
            if child.ready:
                self._next_child = (child.index + 1) % n
                return child
        return None

    def _flush(self) -> None:
        """One pipe message per child per loop turn, not one per page."""
        self._flush_scheduled = False
        for child in self._children:
            if child.outbox and child.pipe is not None:
                items, child.outbox = child.outbox, []
                child.pipe.send(("prep", items))

    def defer(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once every result submitted so far has been delivered (now, if none waits)."""
        if not self._waiting:
            fn()
        else:
            self._deferred.append((self._seq, fn))

    async def barrier(self) -> None:
        """Wait until every result submitted so far has been delivered."""
        if not self._waiting:
            return
        assert self._loop is not None
        done: asyncio.Future[None] = self._loop.create_future()

        def release() -> None:
            if not done.done():
                done.set_result(None)

        self._deferred.append((self._seq, release))
        await done

    # --- receiving ---------------------------------------------------------------------------------
    def _received(self, child: ChildProcess, msg: tuple[str, list[tuple[int, Prepared | None]]]) -> None:
        kind, items = msg
        if kind == "ready":
            child.ready = True
        elif kind == "done":
            for seq, prepared in items:
                self._deliver(seq, prepared)
            self._run_deferred()

    def _deliver(self, seq: int, prepared: Prepared | None) -> None:
        waiting = self._waiting.pop(seq, None)
        if waiting is None:
            return
        if prepared is not None:
            waiting.result.prepared = prepared
        try:
            waiting.deliver(waiting.result)
        except Exception:  # the core's bug must cost one result, not the pipe
            log.exception("delivering %s failed", waiting.result.url)

    def _run_deferred(self) -> None:
        while self._deferred:
            upto, fn = self._deferred[0]
            if self._waiting and next(iter(self._waiting)) <= upto:
                return
            self._deferred.popleft()
            try:
                fn()
            except Exception:  # one callback's bug must not stop the others or the pipe
                log.exception("deferred callback failed")

    def _watch(self) -> None:
        """Once a second: a child that has held a result for ``STALL_S`` (stopped, hung, starved) is
        killed, and what it held is delivered unprepared, so a batch never waits on it for long."""
        if self._closing or self._loop is None:
            return
        if self._waiting:
            oldest = next(iter(self._waiting.values()))
            if self.clock() - oldest.sent_at > STALL_S:
                child = self._children[oldest.child]
                log.error("parse process %d has not answered for %.0f s; replacing it", child.index, STALL_S)
                self._died(child)
        self._loop.call_later(1.0, self._watch)

    def _died(self, child: ChildProcess) -> None:
        """A child is gone: what it held is delivered unprepared (the core prepares it), in order."""
        if child.pipe is None:
            return
        code = child.close()
        child.restarts += 1
        if not self._closing:
            log.error("parse process %d died (exit code %s); its results are prepared here", child.index, code)
        for seq in [s for s, w in self._waiting.items() if w.child == child.index]:
            self._deliver(seq, None)
        self._run_deferred()
        if not self._closing and self._loop is not None and not self._loop.is_closed():
            task = self._loop.create_task(self._start_child(child))
            self._restarting.add(task)
            task.add_done_callback(self._restarting.discard)

    async def close(self) -> None:
        """Deliver what is still out, then stop the children."""
        await self.barrier()
        log.info("parse pool: %d results prepared in parse processes, %d here", self.offloaded, self.local)
        self._closing = True
        for child in self._children:
            child.stop()


class ParsedFetcher:
    """A fetcher whose results reach the crawl through a ``ParsePool`` (the ``Fetcher`` protocol).

    Results go through the pool; the early release of a host and the end of the batch wait for the
    results before them, so the core sees the same order of events as without the pool."""

    def __init__(self, inner: Fetcher, pool: ParsePool) -> None:
        self.inner = inner
        self.pool = pool

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    @property
    def free_slots(self) -> int:
        return int(self.inner.free_slots)

    async def fetch_batch(
        self,
        batch: Batch,
        on_result: Callable[[FetchResult], None],
        *,
        fence: Callable[[], bool] | None = None,
        on_host_done: Callable[[str, float, str], None] | None = None,
    ) -> BatchReport:
        pool = self.pool

        def result(res: FetchResult) -> None:
            pool.submit(res, on_result)

        host_done = None
        if on_host_done is not None:
            done_cb = on_host_done

            def host_done(host: str, delay_s: float, ip: str) -> None:
                pool.defer(lambda: done_cb(host, delay_s, ip))

        try:
            report: BatchReport = await self.inner.fetch_batch(batch, result, fence=fence, on_host_done=host_done)
        except Exception:
            await pool.barrier()  # what it delivered before failing reaches the core before the batch ends
            raise
        await pool.barrier()
        return report
