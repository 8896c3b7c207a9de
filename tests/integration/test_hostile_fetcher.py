"""Fetcher level: both fetchers (aiohttp and thread pool) against every path of hostile.crawl.test in
one batch. Each URL must come back as one clean FetchResult (never internal_error), bodies capped at
max_body_bytes, the Python heap bounded; outcomes are recorded for RELIABILITY.md. (The fetchers' own
suite, test_fetch_hostile.py, checks the exact classes; this one records and checks the invariants.)
"""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

import pytest

from fetchers.aio import AioFetcher
from fetchers.h1 import H1Fetcher
from fetchers.testing import bed_resolver, bed_settings, run_urls
from fetchers.threaded import ThreadedFetcher
from pipeline.harness.faults import results
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.hostile import PATHS

pytestmark = pytest.mark.integration

MAX_BODY = 1 << 20
HEAP_LIMIT = 64 * MAX_BODY


@pytest.mark.parametrize("kind", [AioFetcher, ThreadedFetcher, H1Fetcher], ids=["aio", "threaded", "h1"])
def test_every_hostile_path_is_one_clean_result(kind: Any, tmp_path: Any) -> None:
    with TestbedProcess(2, 2, hostile=True, workdir=tmp_path / "tb") as tb:
        settings = bed_settings(
            tb.dns_server,
            fetch={"total_timeout_s": 2.0, "retries": 1, "retry_backoff_s": 0.05, "max_body_bytes": MAX_BODY},
            politeness={"min_host_delay_s": 0.0, "per_host_concurrency": 4},
        )
        urls = {p: tb.hostile_url(p) for p in PATHS}

        async def go() -> Any:
            async with kind(settings, fetcher_id="h", resolver=bed_resolver(settings)) as f:
                return await run_urls(f, list(urls.values()))

        tracemalloc.start()
        try:
            got, report = asyncio.run(go())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    mode = {AioFetcher: "fetcher-aio", H1Fetcher: "fetcher-h1"}.get(kind, "fetcher-threaded")
    for path, url in urls.items():
        r = got.get(url)
        results.append({"type": "hostile", "mode": mode, "input": path,
                        "outcome": "no result" if r is None else f"status {r.status}" + (" truncated" if r.truncated else ""),
                        "error_class": "" if r is None else r.error_class, "crawl_ok": r is not None,
                        "peak_rss_mb": round(peak / 2**20, 1), "note": "Python heap peak (tracemalloc), whole batch"})  # fmt: skip
    assert set(got) == set(urls.values()) and report.pages == len(PATHS) and not report.unfinished
    for path, url in urls.items():
        r = got[url]
        assert r.error_class != "internal_error", (path, r.error_message)
        assert len(r.body) <= MAX_BODY, path
        assert r.ok or r.error_class, path  # a failure always says why
    assert peak < HEAP_LIMIT, peak
