"""Live visibility for the fleet dispatcher: Prometheus ``/metrics`` and a small HTML ``/status`` page.

``MetricsServer(stats, fleet=...)`` is an aiohttp app the dispatcher starts on a port of its event
loop. Nothing is counted twice: a custom collector (collector.py) reads ``CrawlStats`` (and, when given, the
dispatcher's snapshot) at scrape time, so the crawl's hot path never touches prometheus-client.

``fleet`` is a zero-argument callable returning the dispatcher's snapshot (``Dispatcher.snapshot``,
a ``pipeline.dispatch.protocols.DispatcherStats``); only the attributes in ``FleetView`` and
``FetcherView`` (fleetview.py) are read, plus ``last_seen`` (heartbeat time) per fetcher when it exists. Without a
fleet the fetchers come from ``CrawlStats.set_fetchers``.

The fleet dispatcher runs a blocking loop, so ``start_in_thread`` serves the app from its own event
loop on a daemon thread. The collector then reads ``CrawlStats`` from that thread: its accessors copy
dicts in one C-level step, so a scrape never sees a dict change size mid-iteration. The dispatcher
snapshot is not safe to take from another thread; publish one per tick through ``LatestSnapshot``
(``box.set(dispatcher.snapshot())`` in the loop, ``fleet=box``).

Routes: ``/metrics`` (text exposition), ``/status`` (HTML, refreshes itself every 2 s, no scripts),
``/status.json`` (the same as JSON), ``/`` (redirects to /status). Bind to loopback unless you mean it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from pipeline.observe.collector import StatsCollector
from pipeline.observe.fleetview import FleetView, fetcher_rows
from pipeline.observe.stats import CrawlStats, dns_hit_rate
from pipeline.observe.status_page import render_status

RATE_WINDOW_S = 10.0


class LatestSnapshot:
    """A one-slot mailbox: the dispatcher's loop ``set``s its snapshot, the metrics thread reads it.

    Attribute assignment is atomic, so no lock is needed; readers get the last complete snapshot.
    Calling it before the first ``set`` returns None (the pages then show no fleet fields).
    """

    def __init__(self) -> None:
        self._value: FleetView | None = None

    def set(self, snapshot: FleetView) -> None:
        self._value = snapshot

    def __call__(self) -> FleetView | None:
        return self._value


class RateMeter:
    """Pages/s and bytes/s over the last ``window_s``, from periodic samples of the cumulative counters."""

    def __init__(
        self, stats: CrawlStats, *, window_s: float = RATE_WINDOW_S, clock: Callable[[], float]
    ) -> None:
        self._stats = stats
        self._clock = clock
        self._window = window_s
        self._samples: deque[tuple[float, int, int, int]] = deque()

    def sample(self) -> None:
        now = self._clock()
        s = self._stats
        self._samples.append((now, s.pages, s.bytes, s.failed))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window:
            self._samples.popleft()

    def rates(self) -> dict[str, float]:
        """{"pages_per_s", "bytes_per_s", "errors_per_s"}; zeros until two samples exist."""
        self.sample()
        (t0, p0, b0, e0), (t1, p1, b1, e1) = self._samples[0], self._samples[-1]
        dt = t1 - t0
        if dt <= 0:
            return {"pages_per_s": 0.0, "bytes_per_s": 0.0, "errors_per_s": 0.0}
        return {"pages_per_s": (p1 - p0) / dt, "bytes_per_s": (b1 - b0) / dt, "errors_per_s": (e1 - e0) / dt}


class MetricsServer:
    """The dispatcher's HTTP view. ``await start(host, port)`` returns the bound port (0 = any free one)."""

    def __init__(
        self,
        stats: CrawlStats,
        *,
        fleet: Callable[[], FleetView | None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stats = stats
        self.fleet = fleet
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StatsCollector(stats, fleet, clock))
        self.rates = RateMeter(stats, clock=clock)
        self.app = web.Application()
        self.app.router.add_get("/", self._root)
        self.app.router.add_get("/metrics", self._metrics)
        self.app.router.add_get("/status", self._status)
        self.app.router.add_get("/status.json", self._status_json)
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self._sampler = asyncio.create_task(self._sample_forever())
        return int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
            self._sampler = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start_in_thread(self, host: str = "127.0.0.1", port: int = 0, *, timeout_s: float = 30.0) -> int:
        """Serve from a daemon thread with its own event loop (for a blocking caller); returns the port."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="crawlfleet-metrics", daemon=True)
        thread.start()
        self._thread, self._thread_loop = thread, loop
        try:
            return asyncio.run_coroutine_threadsafe(self.start(host, port), loop).result(timeout_s)
        except BaseException:
            self.stop_thread()
            raise

    def stop_thread(self, *, timeout_s: float = 10.0) -> None:
        """Stop a server started with ``start_in_thread``. Idempotent."""
        loop, thread = self._thread_loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result(timeout_s)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        if not thread.is_alive():
            loop.close()
        self._thread = self._thread_loop = None

    async def _sample_forever(self) -> None:
        while True:
            self.rates.sample()
            await asyncio.sleep(1.0)

    def status(self) -> dict[str, Any]:
        """Everything /status shows, as JSON-able data."""
        fleet = self.fleet() if self.fleet is not None else None
        now = self.clock()
        s = self.stats
        return {
            "now": now,
            "uptime_s": round(now - s.started_at, 1),
            "pages": s.pages,
            "failed": s.failed,
            "bytes": s.bytes,
            "queue": s.queue,
            "discovered": s.discovered,
            "robots_blocked": s.robots_blocked,
            "quota_refusals": s.quota_refusals,
            "dns_hit_rate": dns_hit_rate(s.dns()),
            "batches_in_flight": fleet.in_flight if fleet is not None else None,
            "urls_in_flight": fleet.in_flight_urls if fleet is not None else None,
            "rates": {k: round(v, 2) for k, v in self.rates.rates().items()},
            "fetchers": fetcher_rows(s, fleet, now),
        }

    async def _root(self, _request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/status")

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _status_json(self, _request: web.Request) -> web.Response:
        return web.json_response(self.status())

    async def _status(self, _request: web.Request) -> web.Response:
        return web.Response(text=render_status(self.status()), content_type="text/html", charset="utf-8")
