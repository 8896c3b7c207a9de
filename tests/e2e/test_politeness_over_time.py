"""Politeness over time, on both scales: in a continuous crawl a robots.txt that changes (a page newly
disallowed, a new Crawl-delay) takes effect within the robots cache's age and is reported as a change;
a host that answers 429 gets its Retry-After; and the crawl report's per-host politeness (requests, robots.txt
requests, 429s, the back-off after them, gaps against the delay owed) matches what the testbed's access log
says the server received. Two fetch processes (embedded) and two fleet nodes (fleet)."""

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
from pipeline.harness.testbed.model import (
    CHANGED_CRAWL_DELAY_S,
    CHANGED_DISALLOW,
    ROBOTS_CHANGE_SLOT,
    THROTTLE_RETRY_AFTER_S,
    THROTTLE_SLOT,
    host_name,
)
from pipeline.report.build import load_stats, report_json

pytestmark = pytest.mark.e2e

HOSTS, PAGES = 12, 4
# robots.txt changes once the web has served the path it then disallows (``TestbedProcess.change_robots``:
# an event, not a time, so a loaded machine's slow start moves the change with it); the crawl goes on
# AFTER_S seconds past it. WAIT_S bounds the wait for that first request.
TTL_S, AFTER_S, WAIT_S = 3.0, 16.0, 300.0
CHANGED, THROTTLED = host_name(ROBOTS_CHANGE_SLOT % HOSTS), host_name(THROTTLE_SLOT % HOSTS)
CONFIG = f"""
[fetch]
processes = 2
[politeness]
robots_ttl_s = {TTL_S}
min_host_delay_s = 0.05
[recrawl]
initial_interval_s = 0.5
min_interval_s = 0.5
max_interval_s = 1.0
check_interval_s = 0.2
sitemaps = false
"""


def _testbed(tmp_path: Path) -> TestbedProcess:
    return TestbedProcess(HOSTS, PAGES, seed=3, mutate=True, mutate_rate=1.0, hostile_sitemaps=False,
                          throttle_every=4, workdir=tmp_path / "tb")  # fmt: skip


def _change_once_served(tb: TestbedProcess, running: Callable[[], None]) -> float:
    """Wait until the web has served the path robots.txt will disallow, then change robots.txt; the crawl
    runs on for AFTER_S seconds. ``running`` asserts the crawl is still up. Returns the change's time."""
    deadline = time.monotonic() + WAIT_S
    while not any(e["host"] == CHANGED and e["path"] == CHANGED_DISALLOW for e in tb.read_access_log()):
        running()
        assert time.monotonic() < deadline, "the path was never requested before the change"
        time.sleep(0.5)
        tb.flush_log()
    changed_at = tb.change_robots()
    while time.time() < changed_at + AFTER_S:
        running()
        time.sleep(0.5)
    return changed_at


def _judge(tb: TestbedProcess, out: Path, changed_at: float) -> dict[str, Any]:
    tb.wait_log_flush()
    log = sorted(tb.read_access_log(), key=lambda e: e["t"])
    settled = changed_at + TTL_S + 1.0  # every cached answer is younger than this after the change
    on_changed = [e for e in log if e["host"] == CHANGED]
    late = [e for e in on_changed if e["t"] > settled]
    assert late, "the crawl went on after the change"
    assert not [e for e in late if e["path"] == CHANGED_DISALLOW], "a newly disallowed path was requested"
    assert [e for e in on_changed if e["path"] == CHANGED_DISALLOW and e["t"] < changed_at], "allowed before"
    gaps = [b["t"] - a["t"] for a, b in zip(late, late[1:], strict=False)]
    assert gaps and min(gaps) >= 0.9 * CHANGED_CRAWL_DELAY_S, min(gaps)  # the new Crawl-delay
    throttled = [e for e in log if e["host"] == THROTTLED]
    after = [b["t"] - a["t"] for a, b in zip(throttled, throttled[1:], strict=False) if a["status"] == 429]
    assert after and min(after) >= 0.9 * THROTTLE_RETRY_AFTER_S, after  # Retry-After honoured

    polite = report_json(load_stats(out), out)["politeness"]
    hosts = {h.split(":")[0]: v for h, v in polite["hosts"].items()}  # the report's hosts carry the port
    served = collections.Counter(e["host"] for e in log)
    robots = collections.Counter(e["host"] for e in log if e["path"] == "/robots.txt")
    for h in served:  # the crawl's records say what the server received, request for request
        assert hosts[h]["requests"] == served[h], (h, hosts[h], served[h])
        assert hosts[h]["robots_fetches"] == robots[h], (h, hosts[h]["robots_fetches"], robots[h])
    assert hosts[THROTTLED]["status_429"] == sum(e["status"] == 429 for e in throttled) > 0
    assert hosts[THROTTLED]["backoff_after_429_503_s"]["min"] >= 0.9 * THROTTLE_RETRY_AFTER_S
    assert polite["totals"]["gaps_below_delay"] == 0
    changes = hosts[CHANGED]["robots_changes"]
    assert changes and any(f"+disallow: {CHANGED_DISALLOW}" in c["changed"] for c in changes)
    assert changes[0]["crawl_delay"] == CHANGED_CRAWL_DELAY_S
    return polite


def test_embedded_crawl_follows_a_changing_robots_txt_and_reports_politeness(tmp_path: Path) -> None:
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(CONFIG)
    stop, out = tmp_path / "stop", tmp_path / "out"
    with _testbed(tmp_path) as tb:
        cmd = [
            sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out),
            "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
            "--json", "--no-progress", "--config", str(cfg), "--continuous", "--stop-file", str(stop),
        ]  # fmt: skip
        with ContinuousCrawl(cmd, stop) as crawl:

            def running() -> None:
                assert crawl.running(), crawl.stderr_tail()

            changed_at = _change_once_served(tb, running)
            code, stdout, stderr = crawl.stop(timeout_s=60)
        assert code == 0, stderr[-3000:]
        _judge(tb, out, changed_at)
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["robots_txt"]["changed"] >= 1 and "robots.changed" in stderr


def test_fleet_follows_a_changing_robots_txt_and_reports_politeness(
    rabbitmq: str, fleet: Callable[..., Any], tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    env = {"CRAWLFLEET_RECRAWL_ENABLED": "1", "CRAWLFLEET_RECRAWL_INITIAL_INTERVAL_S": "0.5",
           "CRAWLFLEET_RECRAWL_MIN_INTERVAL_S": "0.5", "CRAWLFLEET_RECRAWL_MAX_INTERVAL_S": "1.0",
           "CRAWLFLEET_RECRAWL_CHECK_INTERVAL_S": "0.2", "CRAWLFLEET_RECRAWL_SITEMAPS": "0",
           "CRAWLFLEET_POLITENESS_ROBOTS_TTL_S": str(TTL_S),
           "CRAWLFLEET_FLEET_SEGMENT_RETENTION_S": "-1"}  # the report reads the nodes' kept segments  # fmt: skip
    with _testbed(tmp_path) as tb:
        f = fleet(rabbitmq, tb, extra_env=env, host_delay=0.05)
        f.start_worker(1)
        f.start_worker(2)
        f.start_dispatcher("--continuous", "--stop-file", str(stop))

        def running() -> None:
            assert f.dispatcher is not None and f.dispatcher.poll() is None, f.log_tail("dispatcher.log")

        changed_at = _change_once_served(tb, running)
        stop.write_text("")
        f.wait_dispatcher(timeout_s=120)
        f.stop()  # the nodes close their segments
        _judge(tb, f.out, changed_at)
