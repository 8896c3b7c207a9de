"""Both fetchers against hostile.crawl.test: bombs (memory bounded), endless and trickling bodies,
deep redirects, broken framing, huge headers, redirects into forbidden addresses. Every case must end
as a clean FetchResult; nothing may raise out of fetch_batch."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from fetchers.aio import AioFetcher, classify
from fetchers.h1 import H1Fetcher
from fetchers.records import Batch, FetchResult, UrlTask
from fetchers.redirects import stop_at_redirects, stopped_target, target_hops
from fetchers.testing import bed_resolver, bed_settings, run_urls
from fetchers.threaded import ThreadedFetcher
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.urls import fingerprint

pytestmark = pytest.mark.integration

MAX_BODY = 1 << 20
PATHS = [
    "/bomb", "/brbomb", "/zstdbomb", "/endless", "/trickle", "/deep-redirect/0", "/badlen", "/hugeheaders",
    "/ssrf-redirect", "/ip-redirect", "/rawbad/status", "/rawbad/garbage", "/rawbad/chunked",
    "/rawbad/latechunk", "/rawbad/close", "/manylinks", "/badutf8",
]  # fmt: skip


@pytest.fixture(scope="module")
def hostile_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    with TestbedProcess(3, 3, hostile=True, workdir=tmp_path_factory.mktemp("hostile")) as tb:
        yield tb


@pytest.fixture(scope="module", params=[AioFetcher, ThreadedFetcher, H1Fetcher], ids=["aio", "threaded", "h1"])
def run(request: pytest.FixtureRequest, hostile_bed: TestbedProcess) -> dict[str, Any]:
    tb = hostile_bed
    settings = bed_settings(
        tb.dns_server,
        fetch={"total_timeout_s": 2.0, "retries": 1, "retry_backoff_s": 0.05, "max_body_bytes": MAX_BODY},
        politeness={"min_host_delay_s": 0.0, "per_host_concurrency": 4},
    )
    urls = {p: tb.hostile_url(p) for p in PATHS}

    async def go() -> Any:
        async with request.param(settings, fetcher_id="h", resolver=bed_resolver(settings)) as f:
            return await run_urls(f, list(urls.values()))

    begin = tb.mark("begin")
    tracemalloc.start()
    try:
        results, report = asyncio.run(go())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    log = tb.log_between(begin, tb.mark("end"))
    return {"r": {p: results[u] for p, u in urls.items()}, "report": report, "peak": peak, "log": log}


def test_every_url_has_a_clean_result(run: dict[str, Any]) -> None:
    assert len(run["r"]) == len(PATHS)
    assert run["report"].pages == len(PATHS) and not run["report"].unfinished
    for p, r in run["r"].items():
        assert r.error_class != "internal_error", (p, r.error_message)


def test_bombs_and_endless_are_capped_in_bounded_memory(run: dict[str, Any]) -> None:
    for p in ("/bomb", "/brbomb", "/zstdbomb", "/endless", "/manylinks"):
        r = run["r"][p]
        assert r.status == 200 and r.truncated and len(r.body) == MAX_BODY and not r.error_class, p
    assert run["r"]["/bomb"].wire_bytes < 2 * MAX_BODY  # stopped reading the wire, too
    # 1 GiB bombs, five 1 MiB caps fetched concurrently: the peak stays a small multiple of the caps.
    assert run["peak"] < 48 * MAX_BODY


def test_trickle_times_out_without_retry(run: dict[str, Any]) -> None:
    r = run["r"]["/trickle"]
    assert r.error_class == "timeout" and r.status == 200
    # Not retried: a timeout after the response head is final (the hostile server logs /trickle only when
    # it finishes, so the access log cannot show the attempts; a wall-time bound would be a timed assertion).
    assert classify(TimeoutError(), got_response=True) == ("timeout", False)
    assert Counter(e["path"] for e in run["log"])["/rawbad/close"] <= 2  # aiohttp's own stale-keep-alive retry


def test_deep_redirects_stop(run: dict[str, Any]) -> None:
    r = run["r"]["/deep-redirect/0"]
    assert r.error_class == "too_many_redirects" and len(r.redirects) == 6
    assert sum(1 for e in run["log"] if e["path"].startswith("/deep-redirect/")) == 6


def test_redirect_to_forbidden_address_refused(run: dict[str, Any]) -> None:
    for p in ("/ssrf-redirect", "/ip-redirect"):
        r = run["r"][p]
        assert r.error_class == "ssrf_blocked" and r.redirects == [run["r"][p].url], p
        assert "127.0.0.53" in r.error_message


def test_broken_http(run: dict[str, Any]) -> None:
    r = run["r"]
    assert r["/badlen"].error_class == "incomplete_body" and r["/badlen"].status == 200
    assert r["/hugeheaders"].error_class == "headers_too_large"
    assert r["/rawbad/status"].error_class == "bad_status_line"
    assert r["/rawbad/garbage"].error_class == "bad_status_line"
    # A malformed chunk is a bad response whether it arrives with the head or after it (aiohttp's C
    # parser used to leave a late one to the total timeout: fetchers.aio._BodyErrorHandler).
    assert r["/rawbad/chunked"].error_class == "bad_response"
    assert r["/rawbad/latechunk"].error_class == "bad_response" and r["/rawbad/latechunk"].status == 200
    assert r["/rawbad/close"].error_class == "server_disconnected"
    assert r["/badutf8"].ok and r["/badutf8"].body  # bytes are kept as sent; decoding is downstream


@pytest.mark.parametrize("fetcher", [AioFetcher, ThreadedFetcher, H1Fetcher], ids=["aio", "threaded", "h1"])
def test_a_fetcher_that_stops_at_redirects_counts_on_from_the_tasks_hops(
    fetcher: type[Any], hostile_bed: TestbedProcess
) -> None:
    """Where redirects are links (a fleet node, a fetch process) a chain is a run of tasks, each the
    target of the one before with one hop more (``target_hops``): the task one short of the limit stops
    at its target as any redirect, the one at the limit fails like the sixth hop of one fetcher's chain,
    after one request."""
    tb = hostile_bed
    settings = bed_settings(tb.dns_server, politeness={"min_host_delay_s": 0.0})  # fetch.max_redirects = 5
    short, at = tb.hostile_url("/deep-redirect/4"), tb.hostile_url("/deep-redirect/5")
    batch = Batch(1, "h", [UrlTask(short, fingerprint(short), 2, redirect_hops=4),
                           UrlTask(at, fingerprint(at), 2, redirect_hops=5)])  # fmt: skip
    results: list[FetchResult] = []

    async def go() -> None:
        async with fetcher(settings, fetcher_id="h", resolver=bed_resolver(settings),
                           redirect_gate=stop_at_redirects) as f:  # fmt: skip
            await f.fetch_batch(batch, results.append)

    begin = tb.mark("begin")
    asyncio.run(go())
    end = tb.mark("end")
    by_url = {r.url: r for r in results}
    first, last = by_url[short], by_url[at]
    assert first.status == 302 and not first.error_class and first.final_url == tb.hostile_url("/deep-redirect/5")
    assert first.redirect_hops == 4 and target_hops(first) == 5
    assert last.error_class == "too_many_redirects" and last.status == 302 and stopped_target(last) == ""
    log = Counter(e["path"] for e in tb.log_between(begin, end))
    assert log["/deep-redirect/4"] == 1 and log["/deep-redirect/5"] == 1 and log["/deep-redirect/6"] == 0
