"""Resuming a re-crawl, judged from the testbed's access log and the exit: a run that starts with nothing
pending fetches what is due now, says so when nothing is, and ``--continuous`` waits for the next due URL.

Before: a resume with URLs due and none pending ended at once with 0 pages and exit 1 ("no page fetched";
the core asked whether it was done before it first requeued due URLs), and ``--resume --continuous`` of a
crawl whose URLs were all fetched and not yet due refused to start ("nothing left to crawl").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess

pytestmark = pytest.mark.e2e


def _env(interval_s: float) -> dict[str, str]:
    return dict(os.environ, CRAWLFLEET_RECRAWL_ENABLED="1", CRAWLFLEET_RECRAWL_INITIAL_INTERVAL_S=str(interval_s),
                CRAWLFLEET_RECRAWL_MIN_INTERVAL_S=str(interval_s), CRAWLFLEET_RECRAWL_SITEMAPS="0")  # fmt: skip


def _crawl(tb: TestbedProcess, out: Path, env: dict[str, str], *args: str) -> tuple[int, dict[str, Any], str]:
    cmd = [sys.executable, "-m", "pipeline.cli", "crawl", "--no-progress", "--json", "--out", str(out),
           "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24", "--host-delay", "0.01",
           *args]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, (json.loads(lines[-1]) if lines else {}), proc.stderr


def _requests(tb: TestbedProcess) -> int:
    tb.wait_log_flush()
    return sum(1 for e in tb.read_access_log() if e["path"] != "/robots.txt")


def test_a_resumed_recrawl_fetches_what_is_due_and_says_when_nothing_is(tmp_path: Path) -> None:
    with TestbedProcess(3, 10, seed=3, workdir=tmp_path / "tb") as tb:
        # URLs due after 2 s: a resume once they are due fetches them, although none is pending.
        soon = tmp_path / "soon"
        code, first, err = _crawl(tb, soon, _env(2.0), *tb.seeds)
        assert code == 0 and first["pages_fetched"] > 0, err[-2000:]
        time.sleep(3.0)
        code, again, err = _crawl(tb, soon, _env(2.0), "--resume")
        assert code == 0, err[-2000:]
        assert again["pages_fetched"] > 0 and again["recrawl"]["requeued"] > 0, again["recrawl"]

        # Nothing due for an hour: the resume asks the web for nothing and says why, exit 0.
        later = tmp_path / "later"
        code, _, err = _crawl(tb, later, _env(3600.0), *tb.seeds)
        assert code == 0, err[-2000:]
        before = _requests(tb)
        code, idle, err = _crawl(tb, later, _env(3600.0), "--resume")
        assert code == 0 and idle["pages_fetched"] == 0, err[-2000:]
        assert "nothing is due for a re-fetch yet" in err and _requests(tb) == before

        # --continuous waits for the next due URL instead of refusing to start, until its stop file.
        stop = tmp_path / "STOP"
        cmd = [sys.executable, "-m", "pipeline.cli", "crawl", "--no-progress", "--json", "--out", str(later),
               "--resume", "--continuous", "--stop-file", str(stop)]  # fmt: skip
        proc = subprocess.Popen(cmd, env=_env(3600.0), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(4.0)
            assert proc.poll() is None, proc.communicate(timeout=10)[1][-2000:]
            stop.write_text("")
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        assert proc.returncode == 0, err[-2000:]
        assert "stopped before any URL came due" in err and _requests(tb) == before
