"""End to end on the testbed, embedded default: ground truth, robots, trap, resume after SIGKILL.

The crawler runs as a real subprocess (the ``crawlfleet`` CLI) against the testbed's real HTTP and
DNS servers; everything is judged from the testbed's access log, never from the crawler's own word.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pipeline.harness.testbed.harness import TestbedProcess

pytestmark = pytest.mark.e2e

MAX_DEPTH = 12


def crawl_cmd(tb: TestbedProcess, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds,
        "--out", str(out), "--dns-server", f"127.0.0.1:{tb.dns_port}",
        "--allow-network", "127.0.10.0/24", "--max-depth", str(MAX_DEPTH),
        "--host-delay", "0.02", "--json", "--no-progress", *extra,
    ]


def key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else ""))


def fetch_counts(tb: TestbedProcess) -> collections.Counter[tuple[str, str]]:
    tb.wait_log_flush()
    return collections.Counter((e["host"], e["path"]) for e in tb.read_access_log())


def wait_requests(tb: TestbedProcess, n: int, *, timeout_s: float = 60) -> None:
    """Until the testbed has logged ``n`` requests (or ``timeout_s`` passed)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        tb.wait_log_flush()
        if len(tb.read_access_log()) >= n:
            return
        time.sleep(0.05)


def run_json(cmd: list[str], *, timeout: float = 240, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestbedProcess, dict[str, Any], dict[str, Any]]]:
    tb = TestbedProcess(20, 50, seed=3, workdir=tmp_path_factory.mktemp("tb-e2e")).start()
    out = tmp_path_factory.mktemp("crawl-e2e") / "out"
    summary = run_json(crawl_cmd(tb, out))
    yield tb, summary, tb.truth(max_depth=MAX_DEPTH)
    tb.close()


def test_every_truth_page_fetched_exactly_once(crawled: tuple[TestbedProcess, dict, dict]) -> None:
    tb, _summary, truth = crawled
    counts = fetch_counts(tb)
    missing = [u for u in truth["pages"] if counts[key(u)] == 0]
    twice = [u for u in truth["pages"] if counts[key(u)] > 1]
    assert not missing, missing[:10]
    assert not twice, twice[:10]


def test_every_fetch_url_requested_and_nothing_outside_truth(crawled: tuple[TestbedProcess, dict, dict]) -> None:
    tb, _summary, truth = crawled
    counts = fetch_counts(tb)
    for u in truth["fetch_urls"]:
        assert counts[key(u)] >= 1, u
    allowed = {key(u) for u in truth["fetch_urls"] + truth.get("redirect_hops", []) + truth["pages"]}
    extra = [k for k in counts if k not in allowed and k[1] != "/robots.txt" and not k[1].startswith("/calendar/")]
    assert not extra, extra[:10]


def test_no_robots_forbidden_fetch_and_robots_once_per_host(crawled: tuple[TestbedProcess, dict, dict]) -> None:
    tb, summary, truth = crawled
    counts = fetch_counts(tb)
    assert truth["forbidden"], "the testbed should have robots-forbidden links"
    assert [u for u in truth["forbidden"] if counts[key(u)]] == []
    robots = [n for (_h, p), n in counts.items() if p == "/robots.txt"]
    assert robots and max(robots) == 1
    assert summary["robots_blocked"] >= 1


def test_trap_is_bounded_and_crawl_summary_is_complete(crawled: tuple[TestbedProcess, dict, dict]) -> None:
    tb, summary, truth = crawled
    counts = fetch_counts(tb)
    calendar = sum(n for (_h, p), n in counts.items() if p.startswith(truth["trap_prefix"]))
    assert 0 < calendar <= MAX_DEPTH + 1
    for field in ("pages_fetched", "pages_failed", "urls_discovered", "robots_blocked", "elapsed_s", "pages_per_s"):
        assert field in summary
    assert summary["pages_fetched"] >= len(truth["pages"])
    # S1's heartbeat figures of the crawl's one node, as a fleet summary has its nodes' (the report's nodes).
    local = summary["fleet"]["node_heartbeats"]["local"]
    assert local["successes"] == summary["pages_fetched"] and local["rate"] > 0 and local["free_slots"] >= 0


def test_warc_output_reads_back(tmp_path: Path) -> None:
    from warcio.archiveiterator import ArchiveIterator

    with TestbedProcess(3, 10, seed=9, workdir=tmp_path / "tb") as tb:
        summary = run_json(crawl_cmd(tb, tmp_path / "out", "--warc"))
        tb.wait_log_flush()
        requests = len(tb.read_access_log())
    responses = 0
    for path in (tmp_path / "out" / "warc").glob("*.warc*"):
        with open(path, "rb") as fh:
            responses += sum(1 for rec in ArchiveIterator(fh) if rec.rec_type == "response")
    # one response record per exchange on the wire: robots.txt, redirect hops and retries included
    assert responses == requests and summary["store"]["pages"] > 0
