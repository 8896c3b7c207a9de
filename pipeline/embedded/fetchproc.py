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

Hostile pages (``pipeline.links.guard``): a child that extracts links parses each page under a guard.
When it dies, the page its marker names gets a strike; with two, the URL is sent to every child it
starts afterwards, which then hands its result back with its journal line, its body and no links
(``Prepared.parse_error``) instead of parsing it. The batches of the dead child go back as for any
death, so the page is requested again once per strike (a request in flight on the killed process).

Politeness holds across processes for the same reason it holds across fleet nodes: the dispatcher
leases a host to one batch at a time and paces it with the delays each report returns. Each child keeps
its own robots.txt cache behind one share (``robots_share``: a file beside the crawl db,
``pipeline.storage.sqlite_robots``), so a host served by two children has its robots.txt fetched once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from fetchers.choice import DEFAULT as DEFAULT_FETCHER
from fetchers.records import Batch, FetchResult
from fetchers.report import BatchReport
from pipeline.embedded.childproc import RestartBudget, spawn_module, usable_cpus
from pipeline.links import guard
from pipeline.plugins.chain import PluginSet
from pipeline.settings import Settings
from pipeline.urls import Scope, TrapRules, host_of

log = logging.getLogger(__name__)



class FetchProcessDied(RuntimeError):
    """The fetch process holding a batch died; the batch goes back to the dispatcher."""


class FetchProcessGaveUp(RuntimeError):
    """A fetch process died again and again: the crawl stops (and can be resumed) rather than spin."""


def processes_for(settings: Settings) -> int:
    """Fetch processes for the embedded crawl: ``fetch.processes``, or, when negative, one per spare core
    (at most four) if there are two or more, else none. One fetch process is never the machine's best:
    it is no faster than none (docs/bench/local.md, runs of 2026-11-22), and it leaves link extraction
    to the crawl's own process, outside the parse guard, where none keeps a parse process."""
    wanted = settings.fetch.processes
    if wanted >= 0:
        return wanted
    spare = usable_cpus() - 1
    return min(4, spare) if spare >= 2 else 0


class HostilePages:
    """Strikes of the pages fetch processes died parsing, shared by every fetch process of a crawl, so
    that a page is set aside after ``guard.STRIKES`` deaths in all, whichever processes they were; and a host
    once ``host_limit`` of its pages were (``fetch.parse_failed_per_host``, 0 = never)."""

    def __init__(self, *, host_limit: int = 0) -> None:
        self.host_limit = host_limit
        self.strikes: dict[str, int] = {}
        self.errors: dict[str, str] = {}  # URL -> parse_error: pages the children must not parse
        self.host_errors: dict[str, str] = {}  # host -> parse_error: hosts whose pages they must not parse
        self._pages_by_host: dict[str, int] = {}
        self.version = 0  # bumped when either grows: running children are told before their next batch

    def blame(self, url: str, why: str) -> int:
        n = self.strikes[url] = self.strikes.get(url, 0) + 1
        if n >= guard.STRIKES and url not in self.errors:
            self.errors[url] = guard.page_error(why, n)
            host = host_of(url)
            pages = self._pages_by_host[host] = self._pages_by_host.get(host, 0) + 1
            if self.host_limit and pages >= self.host_limit:
                self.host_errors[host] = guard.host_error(pages)
            self.version += 1
        return n

    def snapshot(self) -> tuple[dict[str, str], dict[str, str]]:
        """What a child needs: (URL -> error, host -> error)."""
        return dict(self.errors), dict(self.host_errors)


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
        fetcher: str = DEFAULT_FETCHER,
        warc_dir: Path | None = None,
        hostile: HostilePages | None = None,
        robots_share: Path | None = None,
        plugins: PluginSet | None = None,
    ) -> None:
        """``scope`` and ``traps`` (the crawl's) may be set after ``launch`` but before ``start``. ``fetcher``:
        which fetcher the child runs (``fetchers.choice``); ``warc_dir``: the child archives every exchange
        there, in WARC files of its own; ``hostile``: the crawl's book of pages that killed fetch processes
        (one for all of them); ``robots_share``: the file through which the children share robots.txt
        answers (``pipeline.storage.sqlite_robots``; None: each child fetches its own)."""
        self.settings = settings
        self.fetcher = fetcher
        self.warc_dir = warc_dir
        self.robots_share = robots_share
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
        self.budget = RestartBudget()
        self._markers = tempfile.mkdtemp(prefix="crawlfleet-fetch-")
        self.marker = os.path.join(self._markers, "child.marker")
        self.hostile = hostile if hostile is not None else HostilePages()
        self.plugins = plugins  # run in the child with the links when it extracts them (pipeline/plugins)
        self._told = 0  # the book's version the child knows

    @property
    def restarts(self) -> int:
        return self.budget.total

    @property
    def free_slots(self) -> int:
        return max(0, 2 * self.settings.fetch.concurrency - self._pending)

    def launch(self) -> None:
        """Start the child now; it imports its modules (most of a second) while the crawl opens its store.
        ``start`` then hands it the crawl's settings and scope."""
        if self._proc is not None:
            return
        if not self.budget.may_restart():
            raise FetchProcessGaveUp(f"fetch process {self.fetcher_id} died {self.budget.deaths} times in "
                                     f"{self.budget.window_s:g} s; giving up")  # fmt: skip
        self._proc, ours = spawn_module("pipeline.embedded.fetchchild", import_path=self.plugins is not None)  # see pipeline/embedded/childproc.py for why not spawn
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
        robots = str(self.robots_share) if self.robots_share is not None else ""
        self._conn.send((self.settings, self.fetcher_id, self.scope, self.traps, self.parse_links, self.fetcher, warc,
                         self.marker, self.hostile.snapshot(), robots, self.plugins))  # fmt: skip
        self._told = self.hostile.version
        self._loop.add_reader(self._conn.fileno(), self._readable)
        os.set_blocking(self._conn.fileno(), True)  # uvloop made it non-blocking; sends are whole messages
        self._started = True

    async def fetch_batch(
        self,
        batch: Batch,
        on_result: Callable[[FetchResult], None],
        *,
        fence: Callable[[], bool] | None = None,
        on_host_done: Callable[[str, float, str], None] | None = None,
    ) -> BatchReport:
        """Fetch ``batch`` in the child. ``fence`` is the fleet's (pipeline/transport/node/lease.py) and
        ``on_host_done`` an optimisation (hosts are released with the batch): neither is used here."""
        if not self._started:
            await self.start()
        assert self._conn is not None and self._loop is not None
        future: asyncio.Future[BatchReport] = self._loop.create_future()
        self._batches[batch.serial] = (on_result, future)
        self._pending += len(batch.tasks)
        try:
            if self._told != self.hostile.version:  # a page became hostile in another process since
                self._conn.send(("hostile", self.hostile.snapshot()))
                self._told = self.hostile.version
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
        code = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):  # its pipe closed: it is exiting
                code = self._proc.wait(1)
        log.error("fetch process %s died (exit code %s); its %d batches go back", self.fetcher_id, code,
                  len(self._batches))  # fmt: skip
        blamed = self._blame(code)
        self._proc, self._conn, self._started = None, None, False
        self.budget.died(blamed=blamed)
        self._pending = 0
        batches, self._batches = self._batches, {}
        for _, future in batches.values():
            if not future.done():
                future.set_exception(FetchProcessDied(f"fetch process {self.fetcher_id} died"))

    def _blame(self, code: int | None) -> bool:
        """A strike for the page the dead child was parsing (with ``guard.STRIKES`` it is not parsed again);
        False when the child had no page in hand."""
        hand = guard.culprit(self.marker)
        with contextlib.suppress(OSError):  # a successor dying before its first page must not blame this one
            os.unlink(self.marker)
        if hand is None:
            return False
        why = guard.describe_death(code, cpu_limit_s=self.settings.fetch.parse_cpu_limit_s)
        n = self.hostile.blame(hand.url, why)
        log.error("fetch process %s died parsing %s (%s; strike %d)", self.fetcher_id, hand.url, why, n)
        return True

    async def close(self) -> None:
        shutil.rmtree(self._markers, ignore_errors=True)
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
