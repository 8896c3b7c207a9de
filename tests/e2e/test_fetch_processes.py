"""The embedded crawl with its fetcher in child processes (pipeline/embedded/fetchproc.py), judged from the
testbed's access log like tests/e2e/test_embedded_crawl.py: every page once, and a fetch process
killed mid-crawl is replaced without losing a page."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from pipeline.harness.faults.accounting import Strike, account
from pipeline.harness.faults.snapshot import stored_urls
from pipeline.harness.testbed.harness import TestbedProcess
from tests.e2e.test_embedded_crawl import MAX_DEPTH, crawl_cmd, key, wait_requests

pytestmark = pytest.mark.e2e


def _env(processes: int) -> dict[str, str]:
    # identify_process: each fetch process names its pid in its User-Agent, for the fault judge
    return dict(os.environ, CRAWLFLEET_FETCH_PROCESSES=str(processes), CRAWLFLEET_FETCH_IDENTIFY_PROCESS="true")


def _summary(proc: subprocess.Popen[str], *, timeout: float = 240) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_two_fetch_processes_fetch_every_page_once(tmp_path: Path) -> None:
    with TestbedProcess(12, 40, seed=4, workdir=tmp_path / "tb") as tb:
        proc = subprocess.Popen(crawl_cmd(tb, tmp_path / "out"), env=_env(2), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        summary = _summary(proc)
        truth = tb.truth(max_depth=MAX_DEPTH)
        tb.wait_log_flush()
        counts = collections.Counter((e["host"], e["path"]) for e in tb.read_access_log())
    assert not [u for u in truth["pages"] if counts[key(u)] == 0]
    assert not [u for u in truth["pages"] if counts[key(u)] > 1]
    assert not [u for u in truth["forbidden"] if counts[key(u)]]
    # Each process caches robots.txt behind one share beside the crawl db (sqlite_robots): once per host,
    # whichever processes fetched its pages (before the share: once per host and process)
    robots = {h: n for (h, p), n in counts.items() if p == "/robots.txt"}
    assert len(robots) == 12 and set(robots.values()) == {1}, robots
    assert (tmp_path / "out" / "crawl.db.robots").is_file()
    assert set(summary["fetcher_pages"]) == {"local-p0", "local-p1"}


def test_a_killed_fetch_process_is_replaced_and_loses_nothing(tmp_path: Path) -> None:
    """The fetch process SIGKILLed mid-crawl; the crawl's process journals on and starts another. Judged
    from outside (pipeline.harness.faults.accounting): only the killed process's own requests (by the pid
    in its User-Agent) in flight at the kill or made in its last second may be asked again."""
    with TestbedProcess(12, 40, seed=6, workdir=tmp_path / "tb") as tb:
        start = time.time()
        proc = subprocess.Popen(crawl_cmd(tb, tmp_path / "out"), env=_env(1), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        wait_requests(tb, 150)
        children = [
            c
            for c in psutil.Process(proc.pid).children()
            if "pipeline.embedded.fetchchild" in " ".join(c.cmdline())
        ]
        assert len(children) == 1
        killed_at = time.time()
        children[0].send_signal(signal.SIGKILL)
        summary = _summary(proc)
        truth = tb.truth(max_depth=MAX_DEPTH)
        tb.wait_log_flush()
        log = [e for e in tb.read_access_log() if float(e["t"]) >= start - 1.0]
    out = tmp_path / "out"
    strike = Strike("fetcher", "SIGKILL", killed_at, killed_at, frozenset({children[0].pid}))
    acc = account(truth=truth, log=log, stored_urls=stored_urls(out), strike=strike)
    assert acc.lost == 0, acc.lost_sample
    assert acc.repeats_unexcused == 0, acc.repeated_sample
    assert acc.robots_extra == 0, acc.robots_sample
    assert not summary["interrupted"] and summary["pages_fetched"] > 0
