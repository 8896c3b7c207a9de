"""The long-lived half of a fetch worker process: one asyncio loop, its fetchers, one DNS cache, the outbox.

Celery has no async tasks, so the worker runs on the *threads* pool (never solo: measured at 1-2
tasks/s) and each task thread hands its batch to this runtime's loop thread and blocks until the batch
is done and its results are confirmed by the broker. One event loop, one aiohttp session per scope and
one DNS cache serve every batch of the process, as S1's event-driven slave does.

Serial ids make a batch idempotent here: a re-delivered message (after a broker restart, or a lost ack)
whose serial is running joins the running fetch, and one that already finished is answered from memory
without fetching again. A worker that missed its own heartbeats stops starting the URLs of the batches
it held and hands them back (``lease.LeaseGuard``): the dispatcher may have re-issued them already.
Each heartbeat names the batches the node is running (``held``), fetching or storing, so the
dispatcher renews their leases: a node waiting out a store outage keeps its batches. ``incarnation``
names this process and its lease epoch (``<process>/<epoch>``, the epoch counting lapses): a batch
addressed to another process (issued before a restart, which the dispatcher has already re-queued) is
dropped unfetched; one addressed to an earlier epoch of this process (issued before a stop, and delivered
or started only after it, however late) is handed back unfetched (``admission.py``). The process's
fetchers, one per crawl scope, are ``fetcherpool.py``'s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fetchers import loops
from fetchers.records import Batch, FetchResult, UrlTask
from fetchers.report import BatchReport
from pipeline.settings import Settings
from pipeline.transport.node.admission import Admission, BatchKey, admit, batch_key
from pipeline.transport.node.chunks import BatchChunks
from pipeline.transport.node.earlier import EarlierAnswers
from pipeline.transport.node.fetcherpool import FetcherFactory, FetcherPool
from pipeline.transport.node.lease import LeaseGuard
from pipeline.transport.node.sink import NodeSink, Receipt
from pipeline.transport.wire.amqp import Outbox
from pipeline.transport.wire.messages import NodeHeartbeat
from pipeline.transport.wire.pikawire import fleet_parameters
from pipeline.transport.wire.replies import progress_text, reply_text
from pipeline.transport.wire.serialcheck import REVOKED, SerialChecker
from pipeline.transport.wire.sink import SinkSpec
from pipeline.urls import Scope

log = logging.getLogger(__name__)

DONE_MEMORY = 20_000  # finished serials remembered for re-deliveries
SINK_THREADS = 3  # batches storing their pages at once per node (each with its own store connection)

__all__ = ["FetchRuntime", "FetcherFactory"]


def _log_failure(future: concurrent.futures.Future[Any]) -> None:
    if future.exception() is not None:
        log.error("fetcher warm-up failed: %r", future.exception())


@dataclass(slots=True)
class _Counters:
    successes: int = 0
    failures: int = 0
    last_total: int = 0
    last_at: float = 0.0
    rate: float = 0.0


class FetchRuntime:
    """One per worker process. ``start`` once; ``run_batch`` from any thread; ``close`` at shutdown."""

    def __init__(
        self,
        settings: Settings,
        *,
        node: str,
        slots: int,
        factory: FetcherFactory,
        reserved: Callable[[], int] | None = None,
        outbox_options: dict[str, Any] | None = None,
    ) -> None:
        self.settings = settings
        self.node = node
        self.slots = slots
        self.process = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._reserved = reserved
        self._loop = loops.loop_factory(settings.fetch.event_loop)()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"fetch-loop-{node}", daemon=True)
        self.fetchers = FetcherPool(settings, node, factory)  # fetch loop only
        self._lock = threading.Lock()
        self._running: dict[BatchKey, concurrent.futures.Future[tuple[BatchReport, threading.Event]]] = {}
        self._done: OrderedDict[BatchKey, dict[str, Any]] = OrderedDict()
        self._active = 0
        # The batches being run now and their (virtual) fetchers, which the heartbeat names (``held``).
        self._holding: Counter[tuple[str, int, str]] = Counter()
        self._counters = _Counters(last_at=time.monotonic())
        d = settings.dispatch
        self.lease = LeaseGuard.for_heartbeats(heartbeat_s=d.heartbeat_s, missed=d.missed_heartbeats)
        # S1's serial check (#19): asked in the Celery thread, never on the fetch loop.
        self.serials = (SerialChecker(fleet_parameters(settings.fleet, name=f"serial-check {node}"))
                        if d.serial_check else None)  # fmt: skip
        self.outbox = Outbox(
            settings.fleet, node=node, incarnation=self.process, heartbeat_s=d.heartbeat_s,
            heartbeat=self.heartbeat, on_beat=self.lease.beat, **(outbox_options or {}),
        )  # fmt: skip
        self.duplicates = 0
        self.stale = 0
        # Page writes (segment, store, WARC) are blocking I/O: threads of their own keep them off the
        # fetch loop. More than one, because with one the batches of all slots queued behind each other's
        # store writes (measured 2026-11-24: ~1 s between a batch's fetch and its reply, the node idle meanwhile).
        # Each thread has its own sinks, so its own store connection (happybase is not thread-safe).
        self._sink_pool = concurrent.futures.ThreadPoolExecutor(
            SINK_THREADS, thread_name_prefix=f"sink-{node}"
        )
        self._sink_local = threading.local()
        self._all_sinks: list[NodeSink] = []
        self._adopted: set[SinkSpec] = set()  # a killed life's .part files are adopted once per spec
        self._earlier = EarlierAnswers()  # fetch loop only

    @property
    def incarnation(self) -> str:
        """This process at its current lease epoch (asking the lease first: a gap just ended lapses it)."""
        return self._at(self.lease.epoch())

    def _at(self, epoch: int) -> str:
        return f"{self.process}/{epoch}"

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self.outbox.start()
        # Build the first fetcher now (imports, DNS cache, session) rather than in the first batch's time.
        warm = asyncio.run_coroutine_threadsafe(self.fetchers.get(None, serve=False), self._loop)
        warm.add_done_callback(_log_failure)
        log.info("fetch runtime up: node=%s incarnation=%s slots=%d", self.node, self.incarnation, self.slots)

    def close(self, *, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self.fetchers.aclose(), self._loop).result(timeout)
            except Exception:  # shutting down: log and carry on
                log.exception("closing fetchers failed")
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        self.outbox.close(timeout=timeout)
        if self.serials is not None:
            self.serials.close()
        closer = threading.Thread(target=self._close_sinks, name=f"sink-close-{self.node}", daemon=True)
        closer.start()
        closer.join(timeout)

    def _close_sinks(self) -> None:
        """After the writes already handed to the pool (none is closed under a writing thread)."""
        self._sink_pool.shutdown(wait=True)
        with self._lock:
            sinks, self._all_sinks = self._all_sinks, []
        for sink in sinks:
            sink.close()

    # --- batches ---------------------------------------------------------------------------------
    def run_batch(
        self, batch: Batch, *, incarnation: str | None, scope: Scope | None, sink: SinkSpec
    ) -> dict[str, Any]:
        """Fetch ``batch`` (blocking) and return its report as JSON, once per serial per process.

        The node stores the batch's pages itself (``sink``: node/sink.py) and sends one reply without
        bodies (replies.py) once they are stored."""
        epoch = self.lease.epoch()  # taken once: the fetch is fenced by this epoch, however late it starts
        current = self._at(epoch)
        key = batch_key(batch)
        with self._lock:
            known = self._done.get(key)
            running = key in self._running
        admission = admit(incarnation, current, running=running)
        if admission is Admission.STALE:
            self.stale += 1
            log.warning("dropping stale batch %d: addressed to incarnation %s, I am %s",
                        batch.serial, incarnation, current)  # fmt: skip
            return {"serial": batch.serial, "dropped": admission.value}
        if known is not None:
            self.duplicates += 1
            return dict(known, duplicate=True)
        if admission is Admission.LAPSED:  # the hand-back re-queues what the dispatcher did not re-issue
            self.stale += 1
            log.warning("handing back batch %d: addressed to %s, before my lease lapsed (I am %s)",
                        batch.serial, incarnation, current)  # fmt: skip
            self.report_unfinished(batch).wait()
            return {"serial": batch.serial, "dropped": admission.value}
        revoked = False  # S1 serial check: a revoked batch's URLs go back unfetched (fence)
        if not running and self.serials is not None:
            revoked = self.serials.check(batch.service, batch.serial, batch.fetcher_id) == REVOKED
        with self._lock:
            future = self._running.get(key)
            if future is None:
                fetch = self._fetch(batch, scope, sink, revoked=revoked, epoch=epoch if incarnation else None)
                future = asyncio.run_coroutine_threadsafe(fetch, self._loop)
                self._running[key] = future
            else:
                self.duplicates += 1
            self._active += 1
            held = (batch.service, batch.serial, batch.fetcher_id)
            self._holding[held] += 1
        try:
            t0 = time.time()
            report, confirmed = future.result()
            t1 = time.time()
            confirmed.wait()
            t2 = time.time()
            log.debug("batch %d: queued %.3fs, fetched in %.3fs (fetcher says %.3fs), confirmed in %.3fs",
                      batch.serial, t0 - batch.issued_at, t1 - t0, report.elapsed_s, t2 - t1)  # fmt: skip
            out = report.to_json()
            with self._lock:
                self._running.pop(key, None)
                self._done[key] = out
                while len(self._done) > DONE_MEMORY:
                    self._done.popitem(last=False)
            return out
        finally:
            with self._lock:
                self._active -= 1
                self._holding[held] -= 1
                if self._holding[held] <= 0:
                    del self._holding[held]

    async def _fetch(
        self, batch: Batch, scope: Scope | None, sink: SinkSpec, *, revoked: bool = False, epoch: int | None = None
    ) -> tuple[BatchReport, threading.Event]:
        fetcher = await self.fetchers.get(scope, warc=sink.warc, service=batch.service,
                                          store=sink.overridden(store=self.settings.fleet.node_store).store)
        service, key = batch.service, batch_key(batch)
        again: list[UrlTask] = []  # answered here before our lease lapsed (earlier.py): handed back, not fetched
        earlier: set[Any] = set()  # the keys of the batches that answered them
        if epoch is not None:
            keep, again, earlier = self._earlier.split(batch.tasks, epoch)
            if again:
                log.info("batch %d: %d URLs answered here before my lease lapsed go back unfetched",
                         batch.serial, len(again))  # fmt: skip
                batch = dataclasses.replace(batch, tasks=keep)
        counters = self._counters

        async def write(results: list[FetchResult], chunk: int) -> Receipt:
            return await self._loop.run_in_executor(self._sink_pool, self._write, sink, batch, results, chunk)

        def send(results: list[FetchResult], segment: str) -> None:
            self.outbox.put_text(service, progress_text(self.node, self.incarnation, results, segment=segment))

        every = self.settings.fleet.progress_s
        chunks = BatchChunks(batch, write, send, every_s=every if every > 0 else float("inf"))

        def on_result(result: FetchResult) -> None:
            if epoch is not None:
                self._earlier.record(result, epoch, key)
            if result.ok:
                counters.successes += 1
            else:
                counters.failures += 1
            chunks.add(result)

        fence = (lambda: False) if revoked else self.lease.fence(epoch)
        if self.serials is not None:  # under a quota no URL starts after its grant's minute (wire/serialcheck.py)
            fence = self.serials.fence(batch.issued_at, fence)
        ticker = self._loop.create_task(chunks.tick_forever()) if every > 0 else None
        try:
            report = (await fetcher.fetch_batch(batch, on_result, fence=fence) if batch.tasks
                      else BatchReport(batch.serial, batch.fetcher_id, 0, 0.0))  # fmt: skip
        finally:
            if ticker is not None:  # stopped, not cancelled: a chunk being written is finished first
                chunks.stop()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
        report.fetcher_id = batch.fetcher_id  # the dispatcher's (virtual) fetcher, not the node
        last, receipt, unstored = await chunks.finish()
        if unstored:  # nothing of these is known stored: hand them back (re-fetched, here too)
            self._earlier.forget(t.url_id for t in unstored)
            report.unfinished = [*report.unfinished, *unstored]
            report.pages = max(0, report.pages - len(unstored))
        if again:  # once the batches that answered them have stored what they could
            await self._stored(earlier)
            report.unfinished = [*report.unfinished, *again]
        text = reply_text(self.node, self.incarnation, last, report, segment=receipt.segment if receipt else "")
        return report, self.outbox.put_text(service, text)

    async def _stored(self, batches: set[Any]) -> None:
        for key in batches:
            with self._lock:
                running = self._running.get(key)
            if running is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wrap_future(running)

    def report_unfinished(self, batch: Batch) -> threading.Event:
        """Hand every URL of ``batch`` back (a reply without results, all of them unfinished): nothing of
        it is known stored, so it is re-issued. The event is set once the broker has confirmed it."""
        return self._unfinished(batch)[1]

    def _unfinished(self, batch: Batch) -> tuple[BatchReport, threading.Event]:
        report = BatchReport(batch.serial, batch.fetcher_id, 0, 0.0, unfinished=list(batch.tasks))
        text = reply_text(self.node, self.incarnation, [], report, segment="")
        return report, self.outbox.put_text(batch.service, text)

    def _write(self, spec: SinkSpec, batch: Batch, results: list[FetchResult], chunk: int = 0) -> Any:
        s = self.settings.fleet
        spec = spec.overridden(store=s.node_store, segments=s.node_segments_dir)
        sinks: dict[SinkSpec, NodeSink] | None = getattr(self._sink_local, "sinks", None)
        if sinks is None:
            sinks = self._sink_local.sinks = {}
        sink = sinks.get(spec)
        if sink is None:
            with self._lock:  # the first sink of a spec adopts .part files before any thread writes one
                sink = sinks[spec] = NodeSink(spec, node=self.node, adopt=spec not in self._adopted)
                self._adopted.add(spec)
                self._all_sinks.append(sink)
        return sink.write_batch(batch, results, chunk=chunk)

    # --- heartbeat (outbox thread) ---------------------------------------------------------------
    def heartbeat(self) -> NodeHeartbeat:
        c = self._counters
        now = time.monotonic()
        total = c.successes + c.failures
        if now - c.last_at >= 0.5:
            c.rate = (total - c.last_total) / (now - c.last_at)
            c.last_total, c.last_at = total, now
        free = self.fetchers.free_slots()  # S1's q, in all and for each crawl served
        active = self._reserved() if self._reserved is not None else self._active
        with self._lock:
            held = sorted(self._holding)
        return NodeHeartbeat(
            node=self.node, incarnation=self.incarnation, sent_at=time.time(), successes=c.successes,
            failures=c.failures, rate=round(c.rate, 3), free_slots=free, slots=self.slots,
            active=max(active, self._active), address=f"fetch.{self.node}", held=held,
            free_by_service=self.fetchers.free_by_service(),
        )  # fmt: skip

