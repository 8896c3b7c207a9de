"""The embedded default: CrawlCore + AioFetcher joined by calls on one asyncio loop.

The fetcher is one long-lived object with one connection pool; the dispatcher sees it as
``slots`` virtual fetchers (``local-0`` ...), so S3's batch sizing and the host leases work exactly
as in the fleet, where each virtual fetcher is a Celery worker. On a machine with spare cores the
fetcher runs in child processes (``pipeline.embedded.fetchproc``, ``fetch.processes``), slots spread over them;
with ``fetch.processes = 0`` everything runs in this process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fetchers.aio import AioFetcher
from fetchers.protocol import Fetcher
from fetchers.records import Batch
from pipeline.crawl.core import CrawlCore
from pipeline.dispatch.protocols import Heartbeat
from pipeline.dispatch.sizing import local_slots
from pipeline.dns.aiohttp_resolver import AiohttpResolver
from pipeline.dns.cache_resolver import CachingResolver, dns_counters
from pipeline.embedded.fetchproc import FetchProcessGaveUp, ProcessFetcher, processes_for
from pipeline.embedded.parseproc import ParsedFetcher, ParsePool, parse_processes_for
from pipeline.observe.stats import CrawlStats
from pipeline.settings import Settings
from pipeline.storage.factory import from_settings as open_store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CrawlRequest:
    seeds: Sequence[str]
    out_dir: Path
    resume: bool = False


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
    ) -> None:
        self.settings = settings
        self.stats = stats or CrawlStats()
        self.request = request
        self.on_tick = on_tick
        self.clock = clock
        self._stop = asyncio.Event()

    def stop(self) -> None:
        """Ask the crawl to finish its in-flight batches and stop (SIGINT/SIGTERM)."""
        self._stop.set()

    async def run(self) -> dict[str, Any]:
        out = self.request.out_dir
        out.mkdir(parents=True, exist_ok=True)
        n_proc = processes_for(self.settings)
        # Fetch processes are launched first: they import their modules while the store opens. Who
        # extracts links is a balance of CPU: without it a fetch process does less work per page than
        # this process, so one fetch process leaves extraction here and two or more take it along.
        procs = [ProcessFetcher(self.settings, fetcher_id=f"local-p{i}", parse_links=n_proc >= 2) for i in range(n_proc)]
        for proc in procs:
            proc.launch()
        n_parse = parse_processes_for(self.settings, fetch_processes=n_proc)
        pool = ParsePool(self.settings, processes=n_parse) if n_parse else None
        if pool is not None:
            pool.launch()
        store = open_store(self.settings.store, out / "crawl.db")
        stats = self.stats
        core = CrawlCore(
            self.settings,
            store,
            seeds=self.request.seeds,
            out_dir=out,
            clock=self.clock,
            stats=stats,
            resume=self.request.resume,
            write_behind=self.settings.store.write_behind,
        )
        resolver = CachingResolver.from_settings(self.settings.dns)
        fetchers: list[Fetcher]
        if procs:
            for proc in procs:
                proc.scope, proc.traps = core.scope, core.traps
            fetchers = list(procs)
        else:
            # AioFetcher wraps the resolver in the SSRF guard itself (check and connect use one answer).
            fetchers = [AioFetcher(self.settings, fetcher_id="local", resolver=AiohttpResolver(resolver), scope=core.scope)]
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
            core.close()
            summary = core.summary()
            summary["elapsed_s"] = round(time.monotonic() - started, 3)
            fetched = summary.get("pages_fetched", 0)
            summary["pages_per_s"] = round(fetched / summary["elapsed_s"], 1) if summary["elapsed_s"] else 0.0
            summary["interrupted"] = self._stop.is_set() and not core.done()
            if pool is not None:
                summary["parse_processes"] = {"processes": n_parse, "prepared": pool.offloaded, "here": pool.local}
            (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
            store.close()
        return summary

    async def _loop(self, core: CrawlCore, fetchers: list[Fetcher], resolver: CachingResolver, out: Path) -> None:
        slots = [f"local-{i}" for i in range(local_slots(self.settings) * len(fetchers))]
        fetcher_of = {fid: fetchers[i % len(fetchers)] for i, fid in enumerate(slots)}
        for fid in slots:
            core.register_fetcher(fid)
        idle = list(slots)
        running: dict[asyncio.Task[Any], tuple[str, Batch]] = {}
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
                        task = asyncio.ensure_future(
                            fetcher_of[fid].fetch_batch(batch, core.on_result, on_host_done=_host_done(core, batch))
                        )
                        running[task] = (fid, batch)
                    idle = still_idle
                if not running and (core.done() or self._stop.is_set()):
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
                    self._finish(core, fid, batch, task)
                now = time.monotonic()
                if now - last_beat >= beat_every:
                    last_beat = now
                    self._heartbeat(core, slots, sum(f.free_slots for f in fetchers))
                if now - last_tick >= 1.0:
                    last_tick = now
                    self._tick(core, _dns_of(resolver, fetchers), stats_file)
            self._tick(core, _dns_of(resolver, fetchers), stats_file)
        finally:
            stats_file.close()

    def _heartbeat(self, core: CrawlCore, slots: list[str], free_slots: int) -> None:
        now = self.clock()
        stats = core.stats
        elapsed = max(1e-6, now - stats.started_at)
        rate = (stats.pages + stats.failed) / elapsed / max(1, len(slots))
        free = free_slots // max(1, len(slots))
        for fid in slots:
            core.on_heartbeat(
                Heartbeat(fid, sent_at=now, successes=stats.pages, failures=stats.failed, rate=rate, free_slots=free)
            )

    def _finish(self, core: CrawlCore, fid: str, batch: Batch, task: asyncio.Task[Any]) -> None:
        exc = task.exception()
        if isinstance(exc, FetchProcessGaveUp):
            raise exc  # journaled results are safe; `--resume` goes on once the cause is fixed
        if exc is not None:
            # A fetcher bug must not lose the batch: everything not yet journaled goes back.
            log.error("batch %d failed: %r; requeueing it", batch.serial, exc)
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
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, crawl.stop)
