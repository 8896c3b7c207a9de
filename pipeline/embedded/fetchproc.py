"""Fetch processes for the embedded crawl: the same AioFetcher and link extraction, on other CPU cores.

A Python process runs one thread at a time, so a crawl that fetches, parses and records pages in one
process is held to one core however many the machine has. ``ProcessFetcher`` keeps the fetcher's
interface (``start``, ``fetch_batch``, ``free_slots``, ``close``) and runs the fetcher itself in a
child process with its own event loop, aiohttp session, DNS cache and robots cache, exactly as a fleet
worker runs it. The child also does the per-result work that needs no crawl state
(``pipeline.links.prepare``: link candidates and the journal line), so the crawl's process is left with
the journal write, the seen-set, the frontier and the store.

Guarantees: every task of a batch gets exactly one result through ``on_result`` (in the crawl's
process, on its loop), then the batch's report. If the child dies, each batch it held fails with
``FetchProcessDied`` (the engine hands such a batch back to the dispatcher, which re-queues what had
no result) and the next batch starts a new child. A child whose parent dies sees its pipe close and
exits at once, so no orphan goes on fetching.

Politeness holds across processes for the same reason it holds across fleet nodes: the dispatcher
leases a host to one batch at a time and paces it with the delays each report returns. What is per
process is the robots.txt cache (a host served by two children has its robots.txt fetched twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from fetchers.records import Batch, FetchResult
from fetchers.report import BatchReport
from pipeline.embedded.childproc import spawn_module
from pipeline.settings import Settings
from pipeline.urls import Scope, TrapRules

log = logging.getLogger(__name__)

_SEND_EVERY = 32  # results per message at most; fewer when the loop goes idle first
_LINGER_S = 0.002
_MAX_RESTARTS = 5


class FetchProcessDied(RuntimeError):
    """The fetch process holding a batch died; the batch goes back to the dispatcher."""


class FetchProcessGaveUp(RuntimeError):
    """A fetch process died again and again: the crawl stops (and can be resumed) rather than spin."""


def processes_for(settings: Settings) -> int:
    """Fetch processes for the embedded crawl: ``fetch.processes``, or one per spare core when negative."""
    wanted = settings.fetch.processes
    if wanted >= 0:
        return wanted
    return max(0, min(4, (os.cpu_count() or 1) - 1))


class ProcessFetcher:
    """The parent's side of one fetch process. Use from one event loop."""

    def __init__(
        self,
        settings: Settings,
        *,
        fetcher_id: str,
        parse_links: bool,
        scope: Scope | None = None,
        traps: TrapRules | None = None,
        fetcher: str = "aio",
        warc_dir: Path | None = None,
    ) -> None:
        """``scope`` and ``traps`` (the crawl's) may be set after ``launch`` but before ``start``. ``fetcher``:
        which fetcher the child runs (``fetchers.choice``); ``warc_dir``: the child archives every exchange
        there, in WARC files of its own."""
        self.settings = settings
        self.fetcher = fetcher
        self.warc_dir = warc_dir
        self.parse_links = parse_links  # extract links in the child too, or leave that to the crawl's process
        self.fetcher_id = fetcher_id
        self.scope = scope
        self.traps = traps
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._batches: dict[int, tuple[Callable[[FetchResult], None], asyncio.Future[BatchReport]]] = {}
        self._pending = 0
        self._started = False
        self.dns: dict[str, int] = {}  # the child's DNS cache counters, as of its last report
        self.restarts = 0

    @property
    def free_slots(self) -> int:
        return max(0, 2 * self.settings.fetch.concurrency - self._pending)

    def launch(self) -> None:
        """Start the child now; it imports its modules (most of a second) while the crawl opens its store.
        ``start`` then hands it the crawl's settings and scope."""
        if self._proc is not None:
            return
        if self.restarts > _MAX_RESTARTS:
            raise FetchProcessGaveUp(f"fetch process {self.fetcher_id} died {self.restarts} times; giving up")
        self._proc, ours = spawn_module("pipeline.embedded.fetchproc")  # see pipeline/embedded/childproc.py for why not spawn
        self._conn = Connection(ours.detach())
        self._started = False

    async def start(self) -> None:
        if self._proc is None:
            self.launch()
        if self._started:
            return
        assert self._conn is not None and self.scope is not None and self.traps is not None
        self._loop = asyncio.get_running_loop()
        warc = str(self.warc_dir) if self.warc_dir is not None else ""
        self._conn.send((self.settings, self.fetcher_id, self.scope, self.traps, self.parse_links, self.fetcher, warc))
        self._loop.add_reader(self._conn.fileno(), self._readable)
        self._started = True

    async def fetch_batch(
        self,
        batch: Batch,
        on_result: Callable[[FetchResult], None],
        *,
        fence: Callable[[], bool] | None = None,
        on_host_done: Callable[[str, float, str], None] | None = None,
    ) -> BatchReport:
        """Fetch ``batch`` in the child. ``fence`` is the fleet's (pipeline/transport/lease.py) and
        ``on_host_done`` an optimisation (hosts are released with the batch): neither is used here."""
        if not self._started:
            await self.start()
        assert self._conn is not None and self._loop is not None
        future: asyncio.Future[BatchReport] = self._loop.create_future()
        self._batches[batch.serial] = (on_result, future)
        self._pending += len(batch.tasks)
        try:
            self._conn.send(("batch", batch))
        except OSError:
            self._died()
        return await future

    def halt(self) -> None:
        """Stop sending requests now (a crawl's first Ctrl-C): the child's fence closes, so the URLs of its
        batches not yet sent come back unfetched, and the batches end once what is on the wire is done."""
        if self._conn is not None and self._started:
            with contextlib.suppress(OSError):
                self._conn.send(("halt",))

    def _readable(self) -> None:
        conn = self._conn
        assert conn is not None
        try:
            while conn.poll():
                self._handle(conn.recv())
        except (EOFError, OSError):
            self._died()

    def _handle(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "results":
            for result in msg[1]:
                entry = self._batches.get(result.serial)
                if entry is None:
                    continue
                self._pending -= 1
                try:
                    entry[0](result)
                except Exception:  # the core's bug must cost one result, not the pipe
                    log.exception("on_result failed for %s", result.url)
        elif kind in ("report", "failed"):
            serial = msg[1]
            entry = self._batches.pop(serial, None)
            if kind == "report":
                self.dns = msg[3]
            if entry is None or entry[1].done():
                return
            if kind == "report":
                entry[1].set_result(msg[2])
            else:
                entry[1].set_exception(RuntimeError(f"batch {serial} failed in the fetch process: {msg[2]}"))

    def _died(self) -> None:
        """The child is gone: fail its batches (the engine re-queues them) and start afresh next time."""
        if self._conn is not None and self._loop is not None:
            self._loop.remove_reader(self._conn.fileno())
            self._conn.close()
        code = self._proc.poll() if self._proc is not None else None
        log.error("fetch process %s died (exit code %s); its %d batches go back", self.fetcher_id, code,
                  len(self._batches))  # fmt: skip
        self._proc, self._conn, self._started = None, None, False
        self.restarts += 1
        self._pending = 0
        batches, self._batches = self._batches, {}
        for _, future in batches.values():
            if not future.done():
                future.set_exception(FetchProcessDied(f"fetch process {self.fetcher_id} died"))

    async def close(self) -> None:
        proc, conn = self._proc, self._conn
        if proc is None or conn is None:
            return
        if self._loop is not None and self._started:
            self._loop.remove_reader(conn.fileno())
        with contextlib.suppress(OSError):
            conn.send(("stop",))
        for _ in range(100):  # up to 5 s for the child to close its sockets
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        conn.close()
        self._proc, self._conn, self._started = None, None, False


# --- the child ----------------------------------------------------------------------------------------
def _child_main(fd: int) -> None:
    """Entry point of a fetch process: ``python -m pipeline.embedded.fetchproc FD`` (FD: its end of the socket pair)."""
    # Ctrl-C reaches the whole process group; the parent decides how the crawl stops and tells us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    import fetchers.aio  # noqa: F401 - the slow imports, while the parent opens its store
    import pipeline.links.prepare  # noqa: F401

    try:
        settings, fetcher_id, scope, traps, parse_links, kind, warc = conn.recv()
        asyncio.run(_serve(conn, settings, fetcher_id, scope, traps, parse_links=parse_links, kind=kind, warc=warc))
    except EOFError:
        pass
    finally:
        os._exit(0)  # the parent's pipe is our only output; nothing else to flush


class _Outbox:
    """Results go to the parent in small bundles: one pipe message per loop turn, not per page."""

    def __init__(self, conn: Connection, loop: asyncio.AbstractEventLoop, *, gone: Callable[[], None]) -> None:
        self.conn, self.loop, self.gone = conn, loop, gone
        self.items: list[FetchResult] = []
        self.timer: asyncio.TimerHandle | None = None

    def result(self, res: FetchResult) -> None:
        self.items.append(res)
        if len(self.items) >= _SEND_EVERY:
            self.flush()
        elif self.timer is None:
            self.timer = self.loop.call_later(_LINGER_S, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.items:
            items, self.items = self.items, []
            self.send(("results", items))

    def send(self, msg: tuple[Any, ...]) -> None:
        try:
            self.conn.send(msg)
        except OSError:  # the parent is gone
            self.gone()


async def _serve(
    conn: Connection, settings: Settings, fetcher_id: str, scope: Scope, traps: TrapRules, *, parse_links: bool,
    kind: str, warc: str,
) -> None:  # fmt: skip
    from fetchers.choice import make_fetcher
    from fetchers.redirects import stop_at_redirects
    from pipeline.dns.aiohttp_resolver import AiohttpResolver
    from pipeline.dns.cache_resolver import CachingResolver, dns_counters
    from pipeline.links.prepare import prepare
    from pipeline.storage.warc import live_writer

    loop = asyncio.get_running_loop()
    caching = CachingResolver.from_settings(settings.dns)
    writer = live_writer(settings, warc, fetcher_id) if warc else None
    fetcher = make_fetcher(kind, settings, fetcher_id=fetcher_id, resolver=AiohttpResolver(caching), scope=scope,
                           archive=writer.write_exchange if writer is not None else None,
                           redirect_gate=stop_at_redirects)  # no seen-set here: targets go back as links

    def gone() -> None:
        """The parent died (or quit at a second Ctrl-C): stop fetching now (its in-flight batches are
        re-issued on resume), keeping the WARC records written so far whole."""
        if writer is not None:
            writer.close()
        os._exit(0)

    await fetcher.start()
    out = _Outbox(conn, loop, gone=gone)
    stop = asyncio.Event()
    running: set[asyncio.Task[None]] = set()
    halted = [False]  # the crawl is stopping: send no more requests

    def fence() -> bool:
        return not halted[0]

    def on_result(res: FetchResult) -> None:
        try:
            res.prepared = prepare(res, scope=scope, traps=traps, settings=settings, with_links=parse_links)
        except Exception:  # the crawl's process does it itself then
            log.exception("preparing %s failed", res.url)
        out.result(res)

    async def run(batch: Batch) -> None:
        try:
            report = await fetcher.fetch_batch(batch, on_result, fence=fence)
        except Exception as exc:
            out.flush()
            out.send(("failed", batch.serial, f"{type(exc).__name__}: {exc}"[:300]))
            return
        out.flush()  # the batch's results before its report
        out.send(("report", batch.serial, report, dns_counters(caching)))

    def readable() -> None:
        try:
            while conn.poll():
                msg = conn.recv()
                if msg[0] == "batch":
                    task = loop.create_task(run(msg[1]))
                    running.add(task)
                    task.add_done_callback(running.discard)
                elif msg[0] == "halt":
                    halted[0] = True
                else:
                    stop.set()
        except (EOFError, OSError):
            gone()

    loop.add_reader(conn.fileno(), readable)
    await stop.wait()
    loop.remove_reader(conn.fileno())
    for task in running:
        task.cancel()
    await fetcher.close()
    await caching.aclose()
    if writer is not None:
        writer.close()


if __name__ == "__main__":
    _child_main(int(sys.argv[1]))
