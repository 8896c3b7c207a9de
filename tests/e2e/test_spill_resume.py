"""The frontier at scale, killed and resumed (issue #22, 3): 300 hosts, each with more pending URLs than
its window, a few hosts active at a time, the crawl SIGKILLed mid-way and resumed. Judged from the
testbed's access log and the store: every reachable page fetched, and nothing fetched twice but what
the killed crawler had in flight or made in its last second (pipeline.harness.faults.accounting).

Settings that make the frontier work as on a large crawl, scaled down: windows of 16 URLs
(``dispatch.n_max``), 16 hosts active at least, and an active host yields its place after 8 URLs
when others wait (``dispatch.host_session_urls``). The crawl's summary says the frontier did spill
and rotate: windows refilled from the store with more pending than they hold, and hosts activated
more often than there were hosts left to crawl. (Counted against the hosts the resumed run fetched
from, not against all 300: how far the first run gets past its kill point varies with the machine.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from pipeline.harness.faults.accounting import Strike, account, pid_of
from pipeline.harness.faults.snapshot import stored_urls
from pipeline.harness.testbed.harness import TestbedProcess

pytestmark = pytest.mark.e2e

HOSTS, PAGES, DEPTH = 300, 30, 30
WINDOW, ACTIVE, SESSION = 16, 16, 8
ENV = {"CRAWLFLEET_DISPATCH_N_MAX": str(WINDOW), "CRAWLFLEET_DISPATCH_N_MIN": "8",
       "CRAWLFLEET_DISPATCH_ACTIVE_HOSTS": str(ACTIVE), "CRAWLFLEET_DISPATCH_HOST_SESSION_URLS": str(SESSION)}  # fmt: skip


def crawl_cmd(tb: TestbedProcess, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out),
            "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
            "--max-depth", str(DEPTH), "--host-delay", "0", "--json", "--no-progress", *extra]  # fmt: skip


def requests_since(tb: TestbedProcess, start: float) -> int:
    tb.wait_log_flush()
    return sum(1 for e in tb.read_access_log() if float(e["t"]) >= start)


def test_a_crawl_that_spills_and_rotates_hosts_resumes_exactly_once(tmp_path: Path) -> None:
    env = dict(os.environ, **ENV, CRAWLFLEET_FETCH_IDENTIFY_PROCESS="true")  # pids for the fault judge
    with TestbedProcess(HOSTS, PAGES, seed=9, workdir=tmp_path / "tb") as tb:
        truth = tb.truth(max_depth=DEPTH)
        out = tmp_path / "out"
        start = time.time()
        proc = subprocess.Popen(
            crawl_cmd(tb, out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        target = len(truth["pages"]) // 3
        deadline = time.time() + 120
        while requests_since(tb, start) < target and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert proc.poll() is None, "the crawl ended before the kill point"
        pids = frozenset({proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))})
        killed_at = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        resumed = subprocess.run(crawl_cmd(tb, out, "--resume"), env=env, capture_output=True, text=True,
                                 timeout=300, check=False)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        summary: dict[str, Any] = json.loads(resumed.stdout.strip().splitlines()[-1])
        tb.wait_log_flush()
        log = [e for e in tb.read_access_log() if float(e["t"]) >= start]
    assert len(truth["pages"]) >= HOSTS * PAGES * 9 // 10
    # The frontier spilled (a host's pending rows past its window), refilled and rotated its hosts.
    fr = summary["frontier"]
    resumed_hosts = {str(e["host"]) for e in log if float(e["t"]) >= killed_at and pid_of(str(e["ua"])) not in pids}
    assert len(resumed_hosts) > ACTIVE, f"the kill left {len(resumed_hosts)} hosts: nothing had to wait"
    assert fr["refills_past_window"] > 0 and fr["activations"] > len(resumed_hosts), (fr, len(resumed_hosts))
    acc = account(truth=truth, log=log, stored_urls=stored_urls(out),
                  strike=Strike("crawler", "SIGKILL", killed_at, killed_at, pids))  # fmt: skip
    assert acc.lost == 0, acc.lost_sample
    assert acc.repeats_unexcused == 0, acc.repeated_sample
    assert acc.robots_extra == 0, acc.robots_sample
    assert summary["store"]["pending"] == 0
