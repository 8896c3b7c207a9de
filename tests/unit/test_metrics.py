"""The dispatcher's /metrics (parsed with prometheus-client's parser) and /status page, on a real port.

The fleet view is a real ``Dispatcher`` over a ``MemoryFrontier`` (pure, in-process), so a change to
``DispatcherStats`` that the metrics depend on fails here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from fetchers.records import FetchResult, Timings, UrlTask
from pipeline.dispatch.dispatcher import Dispatcher
from pipeline.dispatch.memfrontier import MemoryFrontier
from pipeline.dispatch.protocols import Heartbeat
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.serials import MemorySerialStore, SerialAllocator
from pipeline.observe.metrics import MetricsServer, render_status
from pipeline.observe.stats import LATENCY_BOUNDS_S, CrawlStats
from pipeline.settings import DispatchSettings

T0 = 1_700_000_040.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _stats(clock: Clock) -> CrawlStats:
    stats = CrawlStats(clock=clock)
    for i in range(20):
        stats.on_result(FetchResult(url=f"http://h{i % 4}.test/{i}", url_id=i, depth=1, status=200 if i % 5 else 404,
                                    wire_bytes=1000, fetcher_id="edge-1", timings=Timings(0.001, 0.002, 0.02, 0.05)))
    stats.on_result(FetchResult(url="http://h9.test/", url_id=99, depth=0, error_class="timeout", fetcher_id="edge-2"))
    stats.on_quota_refusal("default", "quota")
    stats.on_robots_blocked(2)
    stats.set_queue(321)
    stats.set_dns({"hits": 30, "misses": 10, "negative_hits": 0, "inflight_joins": 0, "evictions": 0})
    return stats


def _dispatcher(clock: Clock) -> Dispatcher:
    frontier = MemoryFrontier(per_host=1000)
    frontier.add([UrlTask(f"http://h{i % 5}.test/p{i}", i, 0) for i in range(200)], now=clock.now)
    d = Dispatcher(DispatchSettings(k=10, n_min=2, n_max=100), frontier=frontier, quotas=Quotas.unlimited(),
                   serials=SerialAllocator(MemorySerialStore().reserve_serials, block=8), clock=clock)
    for fid, rate in (("edge-1", 80.0), ("edge-2", 20.0)):
        d.register(fid, address=f"amqp://{fid}")
        d.heartbeat(Heartbeat(fid, clock.now, 0, 0, rate, 50))
    d.offer("edge-1", "default")
    return d


async def _get(port: int, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.text()


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_and_status_with_a_real_dispatcher() -> None:
    async def main() -> tuple[tuple[int, str, str], ...]:
        clock = Clock()
        stats = _stats(clock)
        dispatcher = _dispatcher(clock)
        server = MetricsServer(stats, fleet=dispatcher.snapshot, clock=clock)
        port = await server.start("127.0.0.1", 0)
        try:
            clock.now += 1.5
            return (await _get(port, "/metrics"), await _get(port, "/status"), await _get(port, "/status.json"),
                    await _get(port, "/"))
        finally:
            await server.stop()

    metrics, status, status_json, root = asyncio.run(main())
    code, ctype, text = metrics
    assert code == 200 and ctype.startswith("text/plain")
    fams = _families(text)
    value = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in fams.values() for s in f.samples}
    assert value[("crawlfleet_pages_total", ())] == 20
    assert value[("crawlfleet_fetch_failures_total", (("class", "timeout"),))] == 1
    assert value[("crawlfleet_responses_total", (("code", "404"),))] == 4
    assert value[("crawlfleet_quota_refusals_total", (("reason", "quota"), ("service", "default")))] == 1
    assert value[("crawlfleet_queue_urls", ())] == 321
    assert value[("crawlfleet_dns_cache_hit_ratio", ())] == 0.75
    assert value[("crawlfleet_batches_in_flight", ())] == 1
    assert value[("crawlfleet_fetcher_live", (("fetcher", "edge-1"),))] == 1
    assert value[("crawlfleet_fetcher_rate", (("fetcher", "edge-2"),))] == 20.0
    assert value[("crawlfleet_fetcher_batches_in_flight", (("fetcher", "edge-1"),))] == 1
    assert ("crawlfleet_fetcher_batch_size", (("fetcher", "edge-1"),)) in value
    hist = fams["crawlfleet_fetch_phase_seconds"]
    assert hist.type == "histogram"
    buckets = [s for s in hist.samples if s.name.endswith("_bucket") and s.labels["phase"] == "ttfb"]
    assert len(buckets) == len(LATENCY_BOUNDS_S) + 1 and buckets[-1].value == 20
    assert value[("crawlfleet_fetch_phase_seconds_count", (("phase", "ttfb"),))] == 20

    code, ctype, page = status
    assert code == 200 and ctype.startswith("text/html")
    assert "edge-1" in page and "edge-2" in page and "amqp://edge-1" in page
    assert "<script" not in page and "Fetchers (2)" in page
    code, _, body = status_json
    assert code == 200 and '"batches_in_flight": 1' in body
    assert root[0] == 200 and "crawlfleet dispatcher" in root[2]  # / redirects to /status


def test_status_without_a_fleet_uses_the_stats_fetchers_and_escapes_names() -> None:
    async def main() -> tuple[tuple[int, str, str], tuple[int, str, str]]:
        clock = Clock()
        stats = _stats(clock)
        stats.set_fetchers({"local-<b>0</b>": {"n_i": 64, "t_i": 0.01, "live": 1, "p": 90.0, "q": 8,
                                               "last_heartbeat": clock.now - 3}})
        server = MetricsServer(stats, clock=clock)
        port = await server.start()
        try:
            return await _get(port, "/status"), await _get(port, "/metrics")
        finally:
            await server.stop()

    (code, _, page), (_, _, text) = asyncio.run(main())
    assert code == 200 and "local-&lt;b&gt;0&lt;/b&gt;" in page and "<b>0</b>" not in page
    assert "n/a</b> batches in flight" in page
    fams = _families(text)
    ages = [s.value for s in fams["crawlfleet_fetcher_heartbeat_age_seconds"].samples]
    assert ages == [3.0]
    assert "crawlfleet_batches_in_flight" not in fams


def test_render_status_marks_dead_fetchers() -> None:
    st = {
        "now": 0.0, "uptime_s": 1.0, "pages": 0, "failed": 0, "bytes": 0, "queue": 0, "discovered": 0,
        "robots_blocked": 0, "quota_refusals": 0, "dns_hit_rate": None, "batches_in_flight": 0,
        "urls_in_flight": 0, "rates": {"pages_per_s": 0.0, "bytes_per_s": 0.0, "errors_per_s": 0.0},
        "fetchers": [{"fetcher": "f1", "live": False}, {"fetcher": "f2", "live": True}],
    }
    page = render_status(st)
    assert "class='dead'>DEAD<" in page and "class='live'>live<" in page


def test_thread_mode_serves_a_blocking_caller_while_stats_change() -> None:
    """The fleet dispatcher's loop is blocking: the server runs on its own thread and scrapes stay
    consistent while the caller keeps counting."""
    import threading
    import urllib.request

    from pipeline.observe.metrics import LatestSnapshot

    clock = Clock()
    stats = _stats(clock)
    box = LatestSnapshot()
    server = MetricsServer(stats, fleet=box, clock=clock)
    port = server.start_in_thread()
    try:
        def get(path: str) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
                assert resp.status == 200
                return resp.read().decode()

        assert "crawlfleet_batches_in_flight" not in get("/metrics")  # no snapshot published yet
        box.set(_dispatcher(clock).snapshot())
        stop = threading.Event()

        def dispatcher_loop() -> None:  # mutates the stats while the scrapes run
            i = 0
            while not stop.is_set():
                i += 1
                j = i % 50
                stats.on_result(FetchResult(url=f"http://n{j}.test/{i}", url_id=j, depth=i % 9, status=200 + j % 3,
                                            error_class="" if j % 7 else f"e{i % 40}", fetcher_id=f"edge-{j % 4}"))
                stats.set_fetchers({f"edge-{k}": {"n_i": k} for k in range(j % 5)})
                stats.set_dns({"hits": i, "misses": j})

        mutator = threading.Thread(target=dispatcher_loop)
        mutator.start()
        try:
            for _ in range(30):
                _families(get("/metrics"))
                get("/status.json")
        finally:
            stop.set()
            mutator.join()
        fams = _families(get("/metrics"))
        assert fams["crawlfleet_batches_in_flight"].samples[0].value == 1
        assert "edge-2" in get("/status")
    finally:
        server.stop_thread()
        server.stop_thread()  # idempotent
