"""S1's quota in the embedded crawl: ``dispatch.quotas_file`` caps the service's URLs per minute
(t + n <= s·m), judged from the testbed's access log, against the same crawl without the file."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from tests.e2e.test_embedded_crawl import crawl_cmd

pytestmark = pytest.mark.e2e


def _pages_in(tb: TestbedProcess, out: Path, *, seconds: float, quotas: Path | None) -> int:
    """Pages (not robots.txt) the testbed served to a crawl in its first ``seconds``."""
    before = len(tb.read_access_log())
    env = dict(os.environ, CRAWLFLEET_DISPATCH_QUOTAS_FILE=str(quotas) if quotas else "")
    proc = subprocess.Popen(crawl_cmd(tb, out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(seconds)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    tb.wait_log_flush()
    return sum(1 for e in tb.read_access_log()[before:] if e["path"] != "/robots.txt")


def test_a_quota_caps_the_minute_and_without_it_the_crawl_runs_free(tmp_path: Path) -> None:
    quotas = tmp_path / "quotas.toml"
    quotas.write_text("[services]\ndefault = 0.5  # 30 URLs a minute\n")
    with TestbedProcess(10, 40, seed=8, workdir=tmp_path / "tb") as tb:
        capped = _pages_in(tb, tmp_path / "capped", seconds=12, quotas=quotas)
        free = _pages_in(tb, tmp_path / "free", seconds=12, quotas=None)
    assert 0 < capped <= 30, capped  # floor(0.5 * 60) in the first minute, whatever the crawl could do
    assert free > 3 * 30, free  # the same crawl without the file is not held back
