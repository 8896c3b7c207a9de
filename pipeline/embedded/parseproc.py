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

Hostile pages (``pipeline.links.guard``): a child that dies, or is killed for holding a result too long,
names the page it had in hand in its marker file. That page gets a strike; the other results it held go
to a child again (never to this process, which a page that kills a parser would kill too). A page with
two strikes is delivered without links, its body kept, with ``Prepared.parse_error`` saying why: the
core records that on the page's row. Once ``fetch.parse_failed_per_host`` pages of one host went that
way, the host's later pages are delivered the same way without being parsed: each hostile page holds a
child for up to twice ``fetch.parse_cpu_limit_s``, and a host serving many must not hold the crawl.
Deaths blamed on a page do not spend a child's restart budget (``childproc.RestartBudget``), so a storm
of hostile pages never leaves the crawl without children. Only while no child can be started (children
dying of themselves, a broken install) does this process prepare results itself, and never one with a
strike; the once-a-second watch starts a child again as soon as its budget has room.

Results go to a child whenever one is ready; the running batches bound how many are out (about a
thousand). ``MAX_OUTSTANDING`` is only a memory guard past which the crawl's process prepares results
itself: doing so whenever a child lags would lengthen this process's loop turns, which delays reading
the children's answers, which makes them lag more (measured: with a cap of 256, 70% of the pages ended
up prepared here).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from fetchers.records import FetchResult, Prepared
from pipeline.embedded.parsechild import ChildProcess, Pipe
from pipeline.links import guard
from pipeline.links.prepare import followable
from pipeline.plugins.chain import PluginSet
from pipeline.settings import Settings
from pipeline.storage.journal import journal_parts
from pipeline.urls import host_of

log = logging.getLogger(__name__)

MAX_OUTSTANDING = 2048  # results in the children at once; past it, prepare here (a memory guard)
STALL_S = 10.0  # a child holding a result this long (wall time) is replaced, at least (ParsePool._watch)
NO_CHILD = -1  # _Waiting.child of a result waiting for a child to take it


@dataclass(slots=True)
class _Waiting:
    result: FetchResult
    deliver: Callable[[FetchResult], None]
    child: int  # NO_CHILD: waiting for one
    sent_at: float
    strikes: int = 0  # children that died while parsing it
    why: str = ""  # how the last of them died


class ParsePool:
    """The parent's side of the parse processes. Use from one event loop."""

    def __init__(
        self, settings: Settings, *, processes: int, clock: Callable[[], float] = time.monotonic,
        plugins: PluginSet | None = None,
    ) -> None:
        self.settings = settings
        self.plugins = plugins  # run by the children with the links (pipeline/plugins/prepare.py)
        self.clock = clock
        self.cpu_limit_s = settings.fetch.parse_cpu_limit_s
        # Wall time a child may hold a result: the CPU limit ends a runaway parse first; this catches
        # a child that stopped without dying, with room for a loaded machine.
        self.stall_s = max(STALL_S, 3 * self.cpu_limit_s)
        self._markers = tempfile.mkdtemp(prefix="crawlfleet-parse-") if processes > 0 else ""
        self._children: list[ChildProcess] = [
            ChildProcess(i, os.path.join(self._markers, f"child-{i}.marker"), clock=clock, import_path=plugins is not None)
            for i in range(processes)
        ]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seq = 0
        self._waiting: dict[int, _Waiting] = {}  # seq -> result in a child; insertion order = seq order
        self._deferred: collections.deque[tuple[int, Callable[[], None]]] = collections.deque()
        self._next_child = 0
        self._flush_scheduled = False
        self._closing = False
        self._restarting: set[asyncio.Task[None]] = set()  # held so that the loop does not drop them
        self._starting: set[int] = set()  # children a task is starting
        self.offloaded = 0  # results prepared by a child
        self.local = 0  # results delivered as they came (not parseable, or no child free)
        self.quarantined = 0  # pages delivered without links after guard.STRIKES deaths (see the docstring)
        self.host_limit = settings.fetch.parse_failed_per_host
        self._failed_hosts: collections.Counter[str] = collections.Counter()  # host -> pages quarantined
        self.deaths = 0

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
            if not child.may_restart() or self._closing:
                self._settle_orphans()
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
            child.died(blamed=False)  # counts against its budget: the watch does not retry it every second
            return
        child.pipe = proto
        proto.send((self.settings, child.marker, self.plugins))

    # --- submitting --------------------------------------------------------------------------------
    def submit(self, result: FetchResult, deliver: Callable[[FetchResult], None]) -> None:
        """Deliver ``result`` to ``deliver``, prepared by a child when one is free, else at once."""
        if (not followable(result, self.settings) and not self._wanted(result)) or len(self._waiting) >= MAX_OUTSTANDING:
            self.local += 1
            deliver(result)
            return
        if self._failed_hosts and self._host_failed(result):
            deliver(result)
            return
        child = self._pick()
        if child is None and not self._any_child_alive():
            self.local += 1
            deliver(result)
            return
        self._seq += 1
        waiting = _Waiting(result, deliver, NO_CHILD, self.clock())
        self._waiting[self._seq] = waiting
        if child is None:  # a child is starting: it takes the result when it is ready
            return
        self._hand(child, self._seq, waiting)

    def _wanted(self, result: FetchResult) -> bool:
        """A page no link is followed from that a plugin's extractor wants (a JSON API, a nofollow page)."""
        plugins = self.plugins
        return plugins is not None and plugins.wants(result.url, result.status, result.content_type, result.body)

    def _hand(self, child: ChildProcess, seq: int, waiting: _Waiting) -> None:
        waiting.child, waiting.sent_at = child.index, self.clock()
        child.outbox.append((seq, waiting.result))
        self.offloaded += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _any_child_alive(self) -> bool:
        """True while some child runs or may still be started."""
        return any(c.sock is not None or c.may_restart() for c in self._children) and not self._closing

    def _take_orphans(self) -> None:
        """Hand the results that wait for a child to the children that are ready."""
        for seq, waiting in self._waiting.items():
            if waiting.child != NO_CHILD:
                continue
            child = self._pick()
            if child is None:
                return
            self._hand(child, seq, waiting)

    def _settle_orphans(self) -> None:
        """No child will take them: deliver the waiting results here, a page with a strike without links."""
        if not self._any_child_alive():
            self._orphans_here()

    def _orphans_here(self) -> None:
        """Deliver every result waiting for a child unprepared (the core prepares it), except that a
        page with a strike is delivered without links: this process must not parse it."""
        for seq in [s for s, w in self._waiting.items() if w.child == NO_CHILD]:
            waiting = self._waiting[seq]
            if waiting.strikes:
                self._quarantine(seq, waiting)
            else:
                self._deliver(seq, None)
        self._run_deferred()

    def _pick(self) -> ChildProcess | None:
        n = len(self._children)
        for k in range(n):
            child = self._children[(self._next_child + k) % n]
            if child.ready:
                self._next_child = (child.index + 1) % n
                return child
        return None

    def _flush(self) -> None:
        """One pipe message per child per loop turn, not one per page (with the known links since the last)."""
        self._flush_scheduled = False
        for child in self._children:
            if child.outbox and child.pipe is not None:
                items, child.outbox, known, child.known = child.outbox, [], child.known, []
                child.pipe.send(("prep", items, known))

    def note_known(self, url_ids: list[int]) -> None:
        """Fingerprints the crawl's seen-set now holds for good (``Discoveries.on_known``): the children drop
        them from the links they hand back, which the crawl's process would drop after a look-up."""
        for child in self._children:
            if child.pipe is not None:
                child.known.extend(url_ids)

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
            self._take_orphans()
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

    def _quarantine(self, seq: int, waiting: _Waiting) -> None:
        """Deliver a page that killed parsers: its journal line and body, no links, and why."""
        result = waiting.result
        line, packed = journal_parts(result)
        error = guard.page_error(waiting.why, waiting.strikes)
        log.error("quarantined %s: %s", result.url, error)
        self.quarantined += 1
        self._failed_hosts[host_of(result.url)] += 1
        self._deliver(seq, Prepared(line, packed=packed, links=[], parse_error=error))

    def _host_failed(self, result: FetchResult) -> bool:
        """True (and ``result`` prepared without links) when its host is past ``parse_failed_per_host``."""
        pages = self._failed_hosts.get(host_of(result.url), 0)
        if not self.host_limit or pages < self.host_limit:
            return False
        line, packed = journal_parts(result)
        result.prepared = Prepared(line, packed=packed, links=[], parse_error=guard.host_error(pages))
        self.quarantined += 1
        return True

    def _watch(self) -> None:
        """Once a second: a child that has held a result for ``stall_s`` (stopped, hung, starved) is
        killed (``_died`` then blames the page it had in hand), so a batch never waits on it for long;
        results waiting that long for any child are delivered here."""
        if self._closing or self._loop is None:
            return
        now = self.clock()
        for child in self._children:  # out of restarts earlier: started again once its window has room
            if child.sock is None and child.index not in self._starting and child.may_restart():
                self._restart(child)
        held = [w for w in self._waiting.values() if w.child != NO_CHILD]
        if held:
            oldest = min(held, key=lambda w: w.sent_at)
            if now - oldest.sent_at > self.stall_s:
                child = self._children[oldest.child]
                log.error("parse process %d has not answered for %.0f s; replacing it", child.index, self.stall_s)
                self._died(child)
        if any(w.child == NO_CHILD and now - w.sent_at > self.stall_s for w in self._waiting.values()):
            log.error("no parse process took results for %.0f s; preparing them here", self.stall_s)
            self._orphans_here()
        self._loop.call_later(1.0, self._watch)

    def _died(self, child: ChildProcess) -> None:
        """A child is gone. The page it had in hand (its marker) gets a strike: with ``guard.STRIKES`` it is
        delivered without links. What else it held waits for a child again, in order."""
        if child.pipe is None:
            return
        code = child.close()
        self.deaths += 1
        culprit = guard.culprit(child.marker)
        child.died(blamed=culprit is not None)
        with contextlib.suppress(OSError):  # a successor dying before its first page must not blame this one
            os.unlink(child.marker)
        if not self._closing:
            log.error("parse process %d died (exit code %s) parsing %s", child.index, code,
                      culprit.url if culprit else "no page")  # fmt: skip
        for seq in [s for s, w in self._waiting.items() if w.child == child.index]:
            waiting = self._waiting[seq]
            waiting.child, waiting.sent_at = NO_CHILD, self.clock()  # its wait for a child starts now
            if culprit is not None and culprit.key == seq:
                waiting.strikes += 1
                waiting.why = guard.describe_death(code, cpu_limit_s=self.cpu_limit_s)
                if waiting.strikes >= guard.STRIKES:
                    self._quarantine(seq, waiting)
        self._run_deferred()
        self._take_orphans()
        if not self._closing and self._loop is not None and not self._loop.is_closed():
            self._restart(child)
        else:
            self._settle_orphans()

    def _restart(self, child: ChildProcess) -> None:
        assert self._loop is not None
        self._starting.add(child.index)
        task = self._loop.create_task(self._start_child(child))
        self._restarting.add(task)
        task.add_done_callback(self._restarting.discard)
        task.add_done_callback(lambda _t: self._starting.discard(child.index))

    async def close(self) -> None:
        """Deliver what is still out, then stop the children."""
        await self.barrier()
        log.info("parse pool: %d results prepared in parse processes, %d here; %d child deaths, %d pages "
                 "quarantined", self.offloaded, self.local, self.deaths, self.quarantined)  # fmt: skip
        self._closing = True
        for child in self._children:
            child.stop()
        if self._markers:
            shutil.rmtree(self._markers, ignore_errors=True)
