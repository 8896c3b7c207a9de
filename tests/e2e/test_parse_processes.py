"""The embedded crawl with its link extraction in a parse process (pipeline/embedded/parseproc.py, the default
on a machine with a spare core), judged from the testbed's access log: every page once, and a parse
process killed or stopped mid-crawl costs no page and no second fetch (the crawl's process never
lost a result: it keeps each one until it is delivered)."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from tests.e2e.test_embedded_crawl import MAX_DEPTH, crawl_cmd, key, wait_requests

pytestmark = pytest.mark.e2e


def _crawl(tb: TestbedProcess, out: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, CRAWLFLEET_FETCH_PARSE_PROCESSES="1", CRAWLFLEET_FETCH_PROCESSES="0")
    return subprocess.Popen(crawl_cmd(tb, out), env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _summary(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    return dict(json.loads(out.strip().splitlines()[-1]))


def _parse_child(proc: subprocess.Popen[str]) -> psutil.Process:
    for _ in range(100):
        for kid in psutil.Process(proc.pid).children():
            with contextlib.suppress(psutil.Error):  # gone or a zombie meanwhile
                if "pipeline.embedded.parsechild" in " ".join(kid.cmdline()):
                    return kid
        time.sleep(0.05)
    raise AssertionError("no parse process")


def _judge(tb: TestbedProcess, summary: dict[str, Any]) -> None:
    truth = tb.truth(max_depth=MAX_DEPTH)
    tb.wait_log_flush()
    counts = collections.Counter((e["host"], e["path"]) for e in tb.read_access_log())
    assert not [u for u in truth["pages"] if counts[key(u)] == 0]
    assert not [u for u in truth["pages"] if counts[key(u)] > 1]  # not even a request in flight repeats
    assert not [u for u in truth["forbidden"] if counts[key(u)]]
    assert summary["pages_fetched"] >= len(truth["pages"]) and not summary["interrupted"]


def test_parse_process_prepares_pages_and_every_page_is_fetched_once(tmp_path: Path) -> None:
    with TestbedProcess(12, 40, seed=4, workdir=tmp_path / "tb") as tb:
        summary = _summary(_crawl(tb, tmp_path / "out"))
        _judge(tb, summary)
    assert summary["parse_processes"]["processes"] == 1
    assert summary["parse_processes"]["prepared"] > 0


@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_a_parse_process_killed_or_stopped_mid_crawl_costs_no_page(tmp_path: Path, fault: str) -> None:
    with TestbedProcess(12, 40, seed=6, workdir=tmp_path / "tb") as tb:
        proc = _crawl(tb, tmp_path / "out")
        child = _parse_child(proc)
        wait_requests(tb, 150)
        # kill: the crawl delivers what the child held unprepared and starts another; stop: the
        # watchdog replaces a child that holds results for STALL_S
        child.send_signal(signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        summary = _summary(proc)
        _judge(tb, summary)
