"""Every host's sitemaps, robots.txt once: a continuous crawl of a living web where two hosts in three name
sitemaps in robots.txt (a urlset, or an index of a gzip and a plain part) listing pages no page links to.
Whichever fetch process or fleet node loads a host's robots.txt (itself, or from the crawl's robots share),
its Sitemap: lines reach the crawl, so every sitemap-only page of every such host is fetched; and each
host's robots.txt is requested once. On both scales, with two fetch processes and with two fleet nodes;
judged from the testbed's access log. Two hosts are seeds; the crawl reaches the others through links."""

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
from pipeline.harness.testbed.model import host_name

pytestmark = pytest.mark.e2e

HOSTS, PAGES = 12, 5
CONFIG = """
[fetch]
processes = 2
[politeness]
robots_ttl_s = 3600.0
[recrawl]
initial_interval_s = 30.0
min_interval_s = 5.0
max_interval_s = 60.0
check_interval_s = 0.2
"""


def _wanted(tb: TestbedProcess) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(sitemap-only pages, root sitemap files) of the web, as (host, path)."""
    only = {(host_name(i), p) for i in range(HOSTS) for p in tb.web.sitemap_only_paths(i)}
    files = {(host_name(i), "/" + u.split("/", 3)[3]) for i in range(HOSTS) for u in tb.web.sitemap_urls(i)}
    return only, files


def _fetched(tb: TestbedProcess) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
    tb.wait_log_flush()
    log = tb.read_access_log()
    return log, {(e["host"], e["path"]) for e in log if e["status"] == 200}


def _judge(tb: TestbedProcess, log: list[dict[str, Any]]) -> None:
    only, files = _wanted(tb)
    got = {(e["host"], e["path"]) for e in log if e["status"] == 200}
    assert len(only) == 3 * 8 and only <= got, sorted(only - got)  # 8 hosts of 12 list 3 pages each
    assert files <= {(e["host"], e["path"]) for e in log}, sorted(files - got)
    robots = collections.Counter(e["host"] for e in log if e["path"] == "/robots.txt")
    assert robots == {host_name(i): 1 for i in range(HOSTS)}, robots  # once per host, whoever needed it


def test_embedded_crawl_reads_every_host_s_sitemaps_with_fetch_processes(
    make_testbed: Callable[..., TestbedProcess], tmp_path: Path
) -> None:
    tb = make_testbed(HOSTS, PAGES, mutate=True, mutate_rate=1.0, hostile_sitemaps=False)
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(CONFIG)
    stop, out = tmp_path / "stop", tmp_path / "out"
    cmd = [
        sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds[:2], "--out", str(out),
        "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
        "--host-delay", "0.02", "--json", "--no-progress", "--config", str(cfg),
        "--continuous", "--stop-file", str(stop),
    ]  # fmt: skip
    only, _ = _wanted(tb)
    with ContinuousCrawl(cmd, stop) as crawl:
        deadline = time.time() + 120
        while time.time() < deadline and not only <= _fetched(tb)[1]:
            assert crawl.running(), crawl.stderr_tail()
            time.sleep(0.5)
        code, stdout, stderr = crawl.stop(timeout_s=60)
    assert code == 0, stderr[-3000:]
    _judge(tb, _fetched(tb)[0])
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["sitemaps"]["robots_read"] >= 8  # every host with a robots.txt, whichever process loaded it


def test_fleet_reads_every_host_s_sitemaps_with_two_nodes(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    env = {"CRAWLFLEET_RECRAWL_ENABLED": "1", "CRAWLFLEET_POLITENESS_ROBOTS_TTL_S": "3600",
           "CRAWLFLEET_RECRAWL_INITIAL_INTERVAL_S": "30", "CRAWLFLEET_RECRAWL_MAX_INTERVAL_S": "60"}  # fmt: skip
    with TestbedProcess(HOSTS, PAGES, seed=7, mutate=True, hostile_sitemaps=False, workdir=tmp_path / "tb") as tb:
        only, _ = _wanted(tb)
        f = fleet(rabbitmq, tb, extra_env=env)
        f.start_worker(1)
        f.start_worker(2)
        f.start_dispatcher("--continuous", "--stop-file", str(stop), *tb.seeds[:2], seeds=False)
        deadline = time.time() + 150
        while time.time() < deadline and not only <= _fetched(tb)[1]:
            assert f.dispatcher is not None and f.dispatcher.poll() is None, f.log_tail("dispatcher.log")
            time.sleep(0.5)
        stop.write_text("")
        f.wait_dispatcher(timeout_s=120)
        log, _ = _fetched(tb)
    nodes = {e["client"] for e in log}
    assert nodes, "the nodes fetched"
    _judge(tb, log)
