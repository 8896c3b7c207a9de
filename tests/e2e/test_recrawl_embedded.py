"""End to end (#23): `crawlfleet crawl --continuous` keeps re-fetching the living testbed until its stop file
appears, and finds the pages only its sitemaps list. Judged from the testbed's access log (re-fetches, 304s on hosts that honour validators, none on
the hosts that ignore them) and from the crawl's store (one page per URL, the schedule stored)."""

from __future__ import annotations

import collections
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.bench.continuous import ContinuousCrawl
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.sqlite import SqliteStore

pytestmark = pytest.mark.e2e

CONFIG = """
[recrawl]
initial_interval_s = 1.0
min_interval_s = 0.5
max_interval_s = 8.0
check_interval_s = 0.2
failed_interval_s = 1.0
"""


def _log_until(
    tb: TestbedProcess, done: Callable[[list[dict[str, Any]]], bool], *, timeout_s: float
) -> list[Any]:
    deadline = time.time() + timeout_s
    entries: list[dict[str, Any]] = []
    while time.time() < deadline:
        tb.wait_log_flush()
        entries = tb.read_access_log()
        if done(entries):
            break
        time.sleep(0.2)
    return entries


def _page_requests(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["path"] == "/" or e["path"].startswith("/p/")]


def test_continuous_crawl_refetches_with_304s_until_the_stop_file(
    make_testbed: Callable[..., TestbedProcess], tmp_path: Path
) -> None:
    tb = make_testbed(6, 6, mutate=True, mutate_rate=1.0)
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(CONFIG)
    stop, out = tmp_path / "stop", tmp_path / "out"
    cmd = [
        sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out),
        "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
        "--host-delay", "0.02", "--json", "--no-progress", "--config", str(cfg),
        "--continuous", "--stop-file", str(stop),
    ]  # fmt: skip
    with ContinuousCrawl(cmd, stop) as crawl:

        def enough(entries: list[dict[str, Any]]) -> bool:
            pages = _page_requests(entries)
            per_url = collections.Counter((e["host"], e["path"]) for e in pages)
            return (
                sum(e["status"] == 304 for e in pages) >= 20 and sum(n >= 3 for n in per_url.values()) >= 10
            )

        entries = _log_until(tb, enough, timeout_s=90)
        assert crawl.running(), crawl.stderr_tail()  # still running: continuous
        code, stdout, stderr = crawl.stop(timeout_s=60)
    assert code == 0, stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    rc = summary["recrawl"]
    assert rc["requeued"] > 0 and rc["not_modified"] > 0 and rc["conditional_sent"] > 0

    pages = _page_requests(entries)
    per_url = collections.Counter((e["host"], e["path"]) for e in pages)
    assert sum(n >= 3 for n in per_url.values()) >= 10, "URLs fetched again and again"
    assert sum(e["status"] == 304 for e in pages) >= 20
    # hosts i % 6 == 5 ignore validators: never a 304 there, yet their pages are re-fetched (digest decides)
    ignoring = {f"site{i}.crawl.test" for i in range(6) if i % 6 == 5}
    assert not [e for e in pages if e["host"] in ignoring and e["status"] == 304]
    assert any(n >= 2 for (host, _), n in per_url.items() if host in ignoring)

    # sitemaps (robots.txt Sitemap: lines, index, gzip): pages no page links to were found and fetched;
    # the hostile files of host 3 (9 % 6) are clean per-file errors, the crawl went on
    assert any(e["path"].startswith("/only/") and e["status"] == 200 for e in entries)
    errors = summary["sitemaps"]["errors"]
    assert errors.get("bad_xml", 0) >= 1 and errors.get("not_sitemap", 0) >= 1, errors
    assert "http_304" not in errors

    store = SqliteStore(out / "crawl.db")
    try:
        counts = store.counts()
        assert counts["pages"] == counts["done"] + counts["pending"] - _never_fetched(store)
        home = store.get_revisit(tb.seeds[0])
        assert home is not None and home.fetches >= 2
    finally:
        store.close()


def _never_fetched(store: SqliteStore) -> int:
    """PENDING URLs that have no page yet (discovered, not fetched before the stop)."""
    n = 0
    for host, _ in store.pending_hosts():
        n += sum(1 for r in store.pending(host, 100_000) if r.revisit is None)
    return n
