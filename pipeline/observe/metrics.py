"""Live visibility for the fleet dispatcher: Prometheus ``/metrics`` and a small HTML ``/status`` page.

``MetricsServer(stats, fleet=...)`` is an aiohttp app the dispatcher starts on a port of its event
loop. Nothing is counted twice: a custom collector reads ``CrawlStats`` (and, when given, the
dispatcher's snapshot) at scrape time, so the crawl's hot path never touches prometheus-client.

``fleet`` is a zero-argument callable returning the dispatcher's snapshot (``Dispatcher.snapshot``,
a ``pipeline.dispatch.protocols.DispatcherStats``); only the attributes in ``FleetView`` and
``FetcherView`` are read, plus ``last_seen`` (heartbeat time) per fetcher when it exists. Without a
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
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from pipeline.observe.stats import LATENCY_BOUNDS_S, CrawlStats, dns_hit_rate
from pipeline.observe.status_page import render_status

NS = "crawlfleet"
RATE_WINDOW_S = 10.0


class FetcherView(Protocol):
    """The per-fetcher fields read from the dispatcher snapshot (``FetcherStats``)."""

    fetcher_id: str
    address: str
    n: int
    t: float | None
    live: bool
    p: float
    q: int
    r: int
    outstanding: int
    successes: int
    failures: int
    deaths: int


class FleetView(Protocol):
    """The fleet-wide fields read from the dispatcher snapshot (``DispatcherStats``)."""

    now: float
    in_flight: int
    in_flight_urls: int
    last_serial: int

    @property
    def fetchers(self) -> Mapping[str, FetcherView]: ...

    @property
    def refusals(self) -> Mapping[str, int]: ...

    @property
    def dropped(self) -> Mapping[str, int]: ...


FleetSource = Callable[[], FleetView]


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

    def __init__(self, stats: CrawlStats, *, window_s: float = RATE_WINDOW_S, clock: Callable[[], float]) -> None:
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


def fetcher_rows(stats: CrawlStats, fleet: FleetView | None, now: float) -> list[dict[str, Any]]:
    """One dict per fetcher for /status: from the dispatcher snapshot if given, else ``set_fetchers``."""
    results = stats.fetcher_pages()
    rows: list[dict[str, Any]] = []
    if fleet is not None:
        for fid, f in sorted(fleet.fetchers.items()):
            seen = getattr(f, "last_seen", None)
            rows.append(
                {
                    "fetcher": fid,
                    "address": f.address,
                    "live": bool(f.live),
                    "heartbeat_age_s": None if seen is None else round(max(now - float(seen), 0.0), 1),
                    "n_i": f.n,
                    "t_i": f.t,
                    "p": f.p,
                    "q": f.q,
                    "r": f.r,
                    "batches_out": f.outstanding,
                    "successes": f.successes,
                    "failures": f.failures,
                    "deaths": f.deaths,
                    "results": results.get(fid, 0),
                }
            )
        return rows
    for fid, g in sorted(stats.fetchers().items()):
        seen = g.get("last_heartbeat")
        rows.append(
            {
                "fetcher": fid,
                "address": "",
                "live": bool(g.get("live", 1)),
                "heartbeat_age_s": None if seen is None else round(max(now - float(seen), 0.0), 1),
                "n_i": g.get("n_i"),
                "t_i": g.get("t_i"),
                "p": g.get("p"),
                "q": g.get("q"),
                "r": g.get("r"),
                "batches_out": g.get("inflight"),
                "successes": None,
                "failures": None,
                "deaths": None,
                "results": results.get(fid, 0),
            }
        )
    return rows


class StatsCollector:
    """A prometheus-client collector that reads the live stats at scrape time."""

    def __init__(
        self, stats: CrawlStats, fleet: Callable[[], FleetView | None] | None, clock: Callable[[], float]
    ) -> None:
        self._stats = stats
        self._fleet = fleet
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        s = self._stats
        yield _counter("pages", "Results with an HTTP response", s.pages)
        yield _counter("bytes", "Bytes fetched (wire bytes when measured)", s.bytes)
        yield _counter("urls_discovered", "New URLs discovered", s.discovered)
        yield _counter("robots_blocked", "URLs not fetched because robots.txt forbids them", s.robots_blocked)
        failures = CounterMetricFamily(f"{NS}_fetch_failures", "Results without a response, by class", labels=["class"])
        for cls, n in sorted(s.errors_by_class().items()):
            failures.add_metric([cls], n)
        yield failures
        status = CounterMetricFamily(f"{NS}_responses", "HTTP responses by status code", labels=["code"])
        for code, n in sorted(s.status_mix().items()):
            status.add_metric([str(code)], n)
        yield status
        quota = CounterMetricFamily(f"{NS}_quota_refusals", "Admission refusals (S1)", labels=["service", "reason"])
        for (service, reason), n in sorted(s.quota_refusals_by().items()):
            quota.add_metric([service, reason], n)
        yield quota
        yield GaugeMetricFamily(f"{NS}_queue_urls", "URLs pending in the frontier", value=s.queue)
        yield GaugeMetricFamily(f"{NS}_uptime_seconds", "Seconds since the stats started", value=self._clock() - s.started_at)
        yield from self._latency()
        yield from self._dns()
        yield from self._fetchers()

    def _latency(self) -> Iterator[Metric]:
        hist = HistogramMetricFamily(f"{NS}_fetch_phase_seconds", "Fetch latency by phase", labels=["phase"])
        sums = self._stats.latency_sums()
        for phase, counts in self._stats.latency_histograms().items():
            buckets, acc = [], 0
            for bound, c in zip((*LATENCY_BOUNDS_S, float("inf")), counts, strict=True):
                acc += c
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), acc))
            hist.add_metric([phase], buckets, sums[phase])
        yield hist

    def _dns(self) -> Iterator[Metric]:
        dns = self._stats.dns()
        events = CounterMetricFamily(f"{NS}_dns_cache_events", "DNS cache counters", labels=["event"])
        for key, n in sorted(dns.items()):
            events.add_metric([key], n)
        yield events
        rate = dns_hit_rate(dns)
        if rate is not None:
            yield GaugeMetricFamily(f"{NS}_dns_cache_hit_ratio", "Cumulative DNS cache hit ratio", value=rate)

    def _fetchers(self) -> Iterator[Metric]:
        fleet = self._fleet() if self._fleet is not None else None
        rows = fetcher_rows(self._stats, fleet, self._clock())
        gauges = {
            "n_i": ("fetcher_batch_size", "S3 batch size n_i"),
            "t_i": ("fetcher_seconds_per_page", "S3 running mean seconds per page t_i"),
            "live": ("fetcher_live", "1 while the fetcher's heartbeats are current (S1)"),
            "p": ("fetcher_rate", "Download rate p from the last heartbeat (URLs/s)"),
            "q": ("fetcher_free_slots", "Free download slots q from the last heartbeat"),
            "batches_out": ("fetcher_batches_in_flight", "Batches issued and not completed"),
            "heartbeat_age_s": ("fetcher_heartbeat_age_seconds", "Seconds since the last heartbeat"),
        }
        for key, (name, doc) in gauges.items():
            fam = GaugeMetricFamily(f"{NS}_{name}", doc, labels=["fetcher"])
            for row in rows:
                value = row.get(key)
                if isinstance(value, int | float):
                    fam.add_metric([row["fetcher"]], float(value))
            yield fam
        results = CounterMetricFamily(f"{NS}_fetcher_results", "Results received per fetcher", labels=["fetcher"])
        for row in rows:
            results.add_metric([row["fetcher"]], row["results"])
        yield results
        if fleet is not None:
            yield GaugeMetricFamily(f"{NS}_batches_in_flight", "Batches outstanding", value=fleet.in_flight)
            yield GaugeMetricFamily(f"{NS}_urls_in_flight", "URLs in outstanding batches", value=fleet.in_flight_urls)
            yield GaugeMetricFamily(f"{NS}_last_serial", "Last download serial id issued (S1)", value=fleet.last_serial)
            ref = CounterMetricFamily(f"{NS}_dispatch_refusals", "Dispatcher refusals by reason", labels=["reason"])
            for reason, n in sorted(fleet.refusals.items()):
                ref.add_metric([reason], n)
            yield ref
            drop = CounterMetricFamily(f"{NS}_completions_dropped", "Completions dropped by reason", labels=["reason"])
            for reason, n in sorted(fleet.dropped.items()):
                drop.add_metric([reason], n)
            yield drop


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{NS}_{name}", doc, value=value)


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
