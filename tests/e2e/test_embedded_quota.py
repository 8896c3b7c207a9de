"""S1's quota in the embedded crawl: ``dispatch.quotas_file`` caps the service's URLs per minute
(t + n <= s·m), judged from the testbed's access log, against the same crawl without the file.

Event-based: the capped crawl runs until its own stats say the quota refused it (it had more work than
the minute allows) and the server's log holds one of its pages, then it is interrupted; no page count is
compared with a wall-clock window. Each calendar minute of the server's log holds at most floor(60 * m)
page requests. Without the file the same crawl is never refused and fetches the whole web.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from tests.e2e.test_embedded_crawl import MAX_DEPTH, crawl_cmd, key

pytestmark = pytest.mark.e2e

PER_S = 0.5  # 30 URLs a minute


def _refusals(out: Path) -> int:
    """The crawl's quota refusals so far, from its own stats rows (stats.jsonl, one per second)."""
    path = out / "stats.jsonl"
    if not path.exists():
        return 0
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return max((int((r.get("totals") or {}).get("quota_refusals") or 0) for r in rows), default=0)


def _capped(tb: TestbedProcess, out: Path, quotas: Path) -> list[dict[str, Any]]:
    """Page requests (not robots.txt) of a crawl run until the quota has refused it and the server has
    answered at least one of its pages, then interrupted.

    Both events are waited for: the first refusal can come before the one granted page reaches the server
    (its host's robots.txt is asked first), and a crawl stopped then has no page in the log to judge."""
    before = len(tb.read_access_log())

    def pages() -> list[dict[str, Any]]:
        return [e for e in tb.read_access_log()[before:] if e["path"] != "/robots.txt"]

    env = dict(os.environ, CRAWLFLEET_DISPATCH_QUOTAS_FILE=str(quotas))
    proc = subprocess.Popen(crawl_cmd(tb, out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180  # a bound on the wait, not a verdict
        while not (_refusals(out) > 0 and pages()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _refusals(out) > 0, "the quota never refused the crawl"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    tb.wait_log_flush()
    return pages()


def test_a_quota_caps_the_minute_and_without_it_the_crawl_runs_free(tmp_path: Path) -> None:
    quotas = tmp_path / "quotas.toml"
    quotas.write_text(f"[services]\ndefault = {PER_S}\n")
    with TestbedProcess(10, 40, seed=8, workdir=tmp_path / "tb") as tb:
        capped = _capped(tb, tmp_path / "capped", quotas)
        env = dict(os.environ, CRAWLFLEET_DISPATCH_QUOTAS_FILE="")
        free = subprocess.run(crawl_cmd(tb, tmp_path / "free"), env=env, capture_output=True, text=True,
                              timeout=240, check=False)  # fmt: skip
        tb.wait_log_flush()
        truth = tb.truth(max_depth=MAX_DEPTH)
        served = Counter((e["host"], e["path"]) for e in tb.read_access_log())
    per_minute = Counter(int(float(e["t"]) // 60) for e in capped)
    assert capped and max(per_minute.values()) <= int(60 * PER_S), per_minute  # floor(0.5 * 60) a minute
    assert free.returncode == 0, free.stderr[-2000:]
    summary = json.loads(free.stdout.strip().splitlines()[-1])
    assert _refusals(tmp_path / "free") == 0 and summary["pages_fetched"] > len(capped)  # not held back
    assert not [u for u in truth["pages"] if served[key(u)] == 0]  # it fetched the whole web
