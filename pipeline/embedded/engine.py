"""The embedded default: CrawlCore + a fetcher (``fetchers.choice``: aio unless asked) joined by calls on one
asyncio loop. Ctrl-C: ``pipeline.embedded.interrupt``. With ``store.warc`` the fetchers write the WARC as
the exchanges happen (``pipeline.storage.warcwire``), one set of files per fetcher process.

The fetcher is one long-lived object with one connection pool; the dispatcher sees it as
``slots`` virtual fetchers (``local#0`` ...: node ``local``, as a fleet node's ``n1#0``), so S3's batch sizing and the host leases work exactly
as in the fleet, where each virtual fetcher is a Celery worker. On a machine with spare cores the
fetcher runs in child processes (``pipeline.embedded.fetchproc``, ``fetch.processes``), slots spread over them;
with ``fetch.processes = 0`` everything runs in this process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fetchers.choice import DEFAULT as DEFAULT_FETCHER
from fetchers.choice import make_fetcher
from fetchers.protocol import Fetcher
from fetchers.records import Batch, FetchResult
from pipeline.crawl.core import CrawlCore
from pipeline.dispatch.protocols import Heartbeat
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.sizing import local_slots
from pipeline.dns.aiohttp_resolver import AiohttpResolver
from pipeline.dns.cache_resolver import CachingResolver, dns_counters
from pipeline.embedded.childproc import parse_processes_for
from pipeline.embedded.fetchproc import FetchProcessGaveUp, HostilePages, ProcessFetcher, processes_for
from pipeline.embedded.interrupt import EXTRA_GRACE_S, Interrupt
from pipeline.embedded.parsedfetcher import ParsedFetcher
from pipeline.embedded.parseproc import ParsePool
from pipeline.observe.stats import CrawlStats
from pipeline.plugins.chain import PluginSet, portable
from pipeline.settings import Settings
from pipeline.storage.factory import from_settings as open_store
from pipeline.storage.sqlite_robots import SqliteRobotsShare, share_path
from pipeline.storage.warc import WarcWriter, live_writer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CrawlRequest:
    seeds: Sequence[str]
    out_dir: Path
    resume: bool = False
    fetcher: str = DEFAULT_FETCHER  # fetchers.choice.KINDS


class EmbeddedCrawl:
    """Runs one crawl to completion in the current event loop."""

    def __init__(
        self,
        settings: Settings,
        request: CrawlRequest,
        *,
        stats: CrawlStats | None = None,
        on_tick: Callable[[CrawlCore, dict[str, Any] | None], None] | None = None,
        clock: Callable[[], float] = time.time,
        plugins: PluginSet | None = None,
        on_result: Callable[[FetchResult], None] | None = None,
    ) -> None:
        """``plugins``: loaded (``pipeline.plugins.loading.load``); ``on_result``: called with every result
        once the crawl core has applied it (its page's items, if any, are in ``result.prepared.plugged.items``)."""
        self.settings = settings
        self.plugins = plugins
        self.on_result = on_result
        self.stats = stats or CrawlStats()
        self.request = request
        self.on_tick = on_tick
        self.clock = clock
        self._stop = asyncio.Event()
        self.interrupt = Interrupt(
            grace_s=EXTRA_GRACE_S + settings.fetch.read_timeout_s, on_stop=self._stop_now, on_force=self._force
        )
        self._procs: list[ProcessFetcher] = []
        self._warc: WarcWriter | None = None
        self.abandoned: list[str] = []
        self.last_beat: dict[str, float] | None = None  # the last S1 heartbeat of this one node

    def stop(self) -> None:
        """A stop signal (SIGINT/SIGTERM): the first stops new requests (see ``pipeline.embedded.interrupt``),
        the second exits at once."""
        self.interrupt.signal()

    def _stop_now(self) -> None:
        self._stop.set()
        for proc in self._procs:
            proc.halt()

    def _force(self) -> None:
        if self._warc is not None:
            self._warc.close()  # what it buffered; the journal holds every result already

    async def run(self) -> dict[str, Any]:
        out = self.request.out_dir
        out.mkdir(parents=True, exist_ok=True)
        n_proc = processes_for(self.settings)
        plugins = self.plugins
        here = plugins is not None and not portable(
            [e.plugin for e in plugins.extractors] + [p for _, p in plugins.filters] + [p for _, p in plugins.pipelines])
        if here:  # a plugin a helper process cannot unpickle (a class of __main__, a local one): parse here
            log.info("a plugin cannot be pickled to a helper process (defined in __main__ or in a function): "
                     "pages are parsed in the crawl's own process")
            n_proc = 0
        # Fetch processes are launched first: they import their modules while the store opens. Who
        # extracts links is a balance of CPU: without it a fetch process does less work per page than
        # this process, so one fetch process leaves extraction here and two or more take it along.
        warc_dir = out / "warc" if self.settings.store.warc else None
        # One book: a page's strikes add up over every fetch process.
        hostile = HostilePages(host_limit=self.settings.fetch.parse_failed_per_host)
        procs = [
            ProcessFetcher(self.settings, fetcher_id=f"local-p{i}", parse_links=n_proc >= 2,
                           fetcher=self.request.fetcher, warc_dir=warc_dir, hostile=hostile,
                           robots_share=share_path(out),
                           plugins=plugins if n_proc >= 2 else None)
            for i in range(n_proc)
        ]  # fmt: skip
        self._procs = procs
        for proc in procs:
            proc.launch()
        n_parse = 0 if here else parse_processes_for(self.settings, fetch_processes=n_proc)
        pool = ParsePool(self.settings, processes=n_parse, plugins=plugins) if n_parse else None
        if pool is not None:
            pool.launch()
        store = open_store(self.settings.store, out / "crawl.db")
        stats = self.stats
        core = CrawlCore(
            # The fetchers write the WARC, as the exchanges go over the wire (pipeline/storage/warcwire.py);
            # the core's page-based writer would add a second, rebuilt copy.
            dataclasses.replace(self.settings, store=dataclasses.replace(self.settings.store, warc=False)),
            store,
            seeds=self.request.seeds,
            out_dir=out,
            clock=self.clock,
            stats=stats,
            resume=self.request.resume,
            write_behind=self.settings.store.write_behind,
            # S1's admission holds in the embedded crawl too: its service's URLs per minute.
            quotas=Quotas.from_settings_file(self.settings.dispatch.quotas_file),
            plugins=plugins,
        )
        if pool is not None:  # the parse processes leave out the links the seen-set holds for good
            core.found.on_known = pool.note_known
        resolver = CachingResolver.from_settings(self.settings.dns)
        robots: SqliteRobotsShare | None = None
        fetchers: list[Fetcher]
        if procs:
            for proc in procs:
                proc.scope, proc.traps = core.scope, core.traps
            fetchers = list(procs)
        else:
            if warc_dir is not None:
                self._warc = live_writer(self.settings, warc_dir, "local")
            robots = _robots_share(out)
            # The fetcher wraps the resolver in the SSRF guard itself (check and connect use one answer).
            fetchers = [
                make_fetcher(self.request.fetcher, self.settings, fetcher_id="local", resolver=AiohttpResolver(resolver),
                             scope=core.scope, archive=self._warc.write_exchange if self._warc else None,
                             redirect_gate=core.redirects.gate, robots_share=robots)
            ]  # fmt: skip
        if pool is not None:
            await pool.start()
            fetchers = [ParsedFetcher(f, pool) for f in fetchers]
        for fetcher in fetchers:
            await fetcher.start()
        started = time.monotonic()
        try:
            await self._loop(core, fetchers, resolver, out)
        finally:
            for fetcher in fetchers:
                await fetcher.close()
            if pool is not None:
                await pool.close()
            await resolver.aclose()
            if robots is not None:
                robots.close()
            if self._warc is not None:
                self._warc.close()
            core.close()
            summary = core.summary()
            summary["elapsed_s"] = round(time.monotonic() - started, 3)
            fetched = summary.get("pages_fetched", 0)
            summary["pages_per_s"] = round(fetched / summary["elapsed_s"], 1) if summary["elapsed_s"] else 0.0
            summary["interrupted"] = self._stop.is_set() and not core.done()
            if self.abandoned:
                summary["abandoned"] = self.abandoned
            if self.last_beat is not None:  # the one node's S1 figures, as the fleet's summary has its nodes'
                summary["fleet"] = {"node_heartbeats": {"local": self.last_beat}}
            summary["fetcher"] = self.request.fetcher
            if warc_dir is not None:
                summary["warc_files"] = sorted(p.name for p in warc_dir.glob("*.warc*"))
            if pool is not None:
                summary["parse_processes"] = {"processes": n_parse, "prepared": pool.offloaded, "here": pool.local}
            (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
            store.close()
        return summary

    async def _loop(self, core: CrawlCore, fetchers: list[Fetcher], resolver: CachingResolver, out: Path) -> None:
        slots = [f"local#{i}" for i in range(local_slots(self.settings) * len(fetchers))]
        fetcher_of = {fid: fetchers[i % len(fetchers)] for i, fid in enumerate(slots)}
        for fid in slots:
            core.register_fetcher(fid)
        idle = list(slots)
        running: dict[asyncio.Task[Any], tuple[str, Batch]] = {}
        answers: dict[asyncio.Task[Any], set[int]] = {}  # url_ids of each running batch with a result
        stats_file = open(out / "stats.jsonl", "a", encoding="utf-8")  # noqa: SIM115 - closed below
        last_tick = last_beat = 0.0
        # Local slots report like remote fetchers do (S1), so liveness never expires a live batch.
        beat_every = self.settings.dispatch.heartbeat_s / 2
        try:
            while True:
                if not self._stop.is_set():
                    still_idle = []
                    for fid in idle:
                        batch = core.next_batch(fid)
                        if batch is None:
                            still_idle.append(fid)
                            continue
                        answered: set[int] = set()
                        task = asyncio.ensure_future(
                            fetcher_of[fid].fetch_batch(
                                batch, _noting(self._applier(core), answered), fence=self.interrupt.fence,
                                on_host_done=_host_done(core, batch),
                            )
                        )  # fmt: skip
                        running[task] = (fid, batch)
                        answers[task] = answered
                    idle = still_idle
                if not running and (core.done() or self._stop.is_set()):
                    break
                if running and self.interrupt.overdue():
                    self._abandon(running, answers)
                    break
                timeout = self._sleep_for(core)
                if running:
                    done, _ = await asyncio.wait(running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                else:
                    done = set()
                    await asyncio.sleep(timeout)
                for task in done:
                    fid, batch = running.pop(task)
                    idle.append(fid)
                    self._finish(core, fid, batch, task, answered=answers.pop(task, set()))
                now = time.monotonic()
                if now - last_beat >= beat_every:
                    last_beat = now
                    self._heartbeat(core, slots, sum(f.free_slots for f in fetchers))
                if now - last_tick >= 1.0:
                    last_tick = now
                    self._tick(core, _dns_of(resolver, fetchers), stats_file)
            self._tick(core, _dns_of(resolver, fetchers), stats_file)
            self._heartbeat(core, slots, sum(f.free_slots for f in fetchers))  # the summary's last figures
        finally:
            stats_file.close()

    def _applier(self, core: CrawlCore) -> Callable[[FetchResult], None]:
        """``core.on_result``, then the ``on_result`` callback when one was given."""
        callback = self.on_result
        if callback is None:
            return core.on_result

        def apply(res: FetchResult) -> None:
            core.on_result(res)
            try:
                callback(res)
            except Exception:  # the caller's bug must not cost the crawl its result
                log.exception("on_result callback failed for %s", res.url)

        return apply

    def _abandon(self, running: dict[asyncio.Task[Any], tuple[str, Batch]], answers: dict[Any, set[int]]) -> None:
        """The grace after a stop is over: cancel the batches still running. Their URLs without a result
        were on the wire (or waiting for their host's turn); they stay pending for ``--resume``."""
        for task, (_fid, batch) in running.items():
            answered = answers.get(task, set())
            self.abandoned += [t.url for t in batch.tasks if t.url_id not in answered]
            task.cancel()
        log.warning("abandoned %d requests still in flight after %.0f s", len(self.abandoned), self.interrupt.grace_s)

    def _heartbeat(self, core: CrawlCore, slots: list[str], free_slots: int) -> None:
        now = self.clock()
        stats = core.stats
        elapsed = max(1e-6, now - stats.started_at)
        rate = (stats.pages + stats.failed) / elapsed / max(1, len(slots))
        free = free_slots // max(1, len(slots))
        self.last_beat = {"successes": stats.pages, "failures": stats.failed, "rate": rate * len(slots),
                          "free_slots": free_slots}  # fmt: skip
        for fid in slots:
            core.on_heartbeat(
                Heartbeat(fid, sent_at=now, successes=stats.pages, failures=stats.failed, rate=rate, free_slots=free)
            )

    def _finish(self, core: CrawlCore, fid: str, batch: Batch, task: asyncio.Task[Any], *, answered: set[int]) -> None:
        """Close a finished batch task; ``answered``: url_ids of its tasks whose result reached the core."""
        exc = task.exception()
        if isinstance(exc, FetchProcessGaveUp):
            raise exc  # journaled results are safe; `--resume` goes on once the cause is fixed
        if exc is not None:
            # A fetcher bug (or a dead fetch process) must not lose the batch: everything not yet
            # journaled goes back. The URLs are named: they are the requests the failure may repeat.
            back = [t.url for t in batch.tasks if t.url_id not in answered]
            log.error("batch %d failed: %r; requeueing its %d URL(s) without a result: %s", batch.serial, exc,
                      len(back), " ".join(back))  # fmt: skip
            core.on_batch_done(batch.serial, fetcher_id=fid, pages=0, elapsed_s=0.0, unfinished=batch.tasks)
            return
        report = task.result()
        core.on_batch_done(
            batch.serial,
            fetcher_id=fid,
            pages=report.pages,
            elapsed_s=report.elapsed_s,
            host_delays=report.host_delays,
            host_ips=report.host_ips,
            unfinished=report.unfinished,
        )

    def _sleep_for(self, core: CrawlCore) -> float:
        ready = core.frontier.next_ready_at()
        if ready is None:
            return 0.05
        return min(0.05, max(0.001, ready - self.clock()))

    def _tick(self, core: CrawlCore, dns: dict[str, int], stats_file: Any) -> None:
        core.stats.set_dns(dns)
        core.stats.set_fetchers(_fetcher_view(core))
        row = core.tick()
        if row is not None:
            stats_file.write(json.dumps(row, separators=(",", ":")) + "\n")
            stats_file.flush()
        if self.on_tick is not None:
            self.on_tick(core, row)


def _noting(on_result: Callable[[FetchResult], None], answered: set[int]) -> Callable[[FetchResult], None]:
    def noted(res: FetchResult) -> None:
        answered.add(res.url_id)
        on_result(res)

    return noted


def _host_done(core: CrawlCore, batch: Batch) -> Callable[[str, float, str], None]:
    def done(host: str, delay_s: float, ip: str) -> None:
        core.on_host_done(batch.serial, fetcher_id=batch.fetcher_id, host=host, delay_s=delay_s, ip=ip)

    return done


def _dns_of(resolver: CachingResolver, fetchers: list[Fetcher]) -> dict[str, int]:
    """This process's DNS counters, plus those the fetch processes last reported."""
    total = dns_counters(resolver)
    for f in fetchers:
        for name, value in getattr(f, "dns", {}).items():
            total[name] = total.get(name, 0) + value
    return total


def _fetcher_view(core: CrawlCore) -> dict[str, dict[str, float]]:
    snap = core.dispatcher.snapshot()
    return {
        fid: {"n_i": float(f.n), "t_i": float(f.t or 0.0), "live": float(f.live), "p": f.p, "q": float(f.q)}
        for fid, f in snap.fetchers.items()
    }


def install_signal_handlers(crawl: EmbeddedCrawl) -> None:
    """SIGINT and SIGTERM: the first stops the crawl cleanly, the second quits at once (``crawl.stop``)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, crawl.stop)


def _robots_share(out: Path) -> SqliteRobotsShare | None:
    """The crawl directory's robots.txt share (``pipeline.storage.sqlite_robots``): a resumed crawl takes a
    host's answer from it while fresh instead of fetching robots.txt again. None when it cannot be opened
    (robots.txt is then fetched as without a share)."""
    try:
        return SqliteRobotsShare(share_path(out))
    except Exception as exc:  # noqa: BLE001 - a share only saves fetches
        log.warning("robots share in %s unavailable: %s", out, exc)
        return None
