"""Priority in a real embedded crawl (#23 point 5): the crawl counts in-links of the URLs it knows, and a
host's next lease takes its most linked-to pending URLs first (depth as tie-break), with politeness
unchanged. Judged from the testbed's access log against the crawl db's in-link counts.

Two runs of one crawl directory: the first stops after a few pages (``--max-pages``), leaving pending URLs
with settled in-link counts; the resumed run's first lease of the host must take the highest-scored of
them, where the store's own order (shallowest, then URL) would take others."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.base import UrlRecord
from pipeline.storage.sqlite import SqliteStore
from tests.e2e.test_cli_resume import summary_of
from tests.integration.test_priority_fleet import _pages, _path

pytestmark = pytest.mark.e2e

FIRST_RUN = 20  # pages before the stop
BATCH = 16  # the frontier's per-host batch cap (dispatch.k // 4 with the default k = 64)


BIN = str(Path(sys.executable).with_name("crawlfleet"))


def crawl(priority: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CRAWLFLEET_DISPATCH_PRIORITY": priority}
    return subprocess.run([BIN, "crawl", "--no-progress", "--json", *args], capture_output=True, text=True,
                          timeout=240, check=False, env=env)  # fmt: skip


def _pending(out: Path, host: str) -> list[UrlRecord]:
    store = SqliteStore(out / "crawl.db")
    try:
        return store.pending(host, 10_000)
    finally:
        store.close()


def test_a_resumed_embedded_crawl_leases_high_inlink_urls_first(tmp_path: Path) -> None:
    priority = "inlinks"  # the default, set explicitly so the test does not depend on it
    with TestbedProcess(1, 120, seed=11, workdir=tmp_path / "tb") as tb:
        host = urlsplit(tb.seeds[0]).netloc  # the store's host is the authority (host:port)
        out = tmp_path / "out"
        common = ("--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
                  "--host-delay", "0.05")  # fmt: skip
        summary_of(crawl(priority, *tb.seeds, "--out", str(out), *common, "--max-pages", str(FIRST_RUN)))
        pending = _pending(out, host)
        assert len(pending) > 2 * BATCH, "enough pending URLs for the order to matter"
        tb.wait_log_flush()
        before = len(tb.read_access_log())
        summary_of(crawl(priority, "--resume", "--out", str(out), "--max-pages", str(FIRST_RUN + 2 * BATCH)))
        tb.wait_log_flush()
        second = _pages(tb.read_access_log()[before:])
        forbidden = {_path(u) for u in tb.truth()["forbidden"]}

    # The lease the frontier's rule gives: in-links high to low, then depth, then the store's order.
    ranked = sorted(range(len(pending)), key=lambda i: (-pending[i].inlinks, pending[i].depth, i))
    lease = [_path(pending[i].url) for i in ranked[:BATCH]]
    expected = [p for p in lease if p not in forbidden]  # leased, but robots.txt forbids the fetch
    fetched = [p for p in second if p in {_path(r.url) for r in pending}][: len(expected)]
    assert len(expected) >= BATCH // 2 and set(fetched) == set(expected), (fetched, expected)
    # The test can fail: the store's own order (depth, URL) would have leased a different set.
    assert set(lease) != {_path(r.url) for r in pending[:BATCH]}
    assert max(r.inlinks for r in pending) > min(r.inlinks for r in pending), "in-links are counted"
