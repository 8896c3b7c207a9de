"""A crawl directory remembers its settings: ``crawl --resume --out DIR`` alone goes on where the crawl
stopped, with the DNS server, allowed networks and limits it started with; ``--max-pages`` is a total;
a resume that cannot resolve any of its hosts stops with one line and leaves every URL pending; a crawl
SIGKILLed mid-way and resumed fetches every page, and repeats only what was in flight on it at the kill.
Judged from the testbed's access log, the journal and the crawl db.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest

from pipeline.harness.faults.accounting import Strike, account
from pipeline.harness.faults.snapshot import stored_urls
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.sqlite import SqliteStore
from tests.e2e.test_embedded_crawl import MAX_DEPTH, crawl_cmd, run_json, wait_requests

pytestmark = pytest.mark.e2e

BIN = str(Path(sys.executable).with_name("crawlfleet"))


def crawl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BIN, "crawl", "--no-progress", "--json", *args], capture_output=True, text=True,
                          timeout=240, check=False)  # fmt: skip


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def counts(out: Path) -> dict[str, int]:
    store = SqliteStore(out / "crawl.db")
    try:
        return store.counts()
    finally:
        store.close()


def settled(out: Path) -> int:
    c = counts(out)
    return c["done"] + c["failed"] + c["blocked"]


def key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else ""))


def closed_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_resume_remembers_settings_counts_max_pages_in_total_and_never_burns_the_queue(
    tmp_path: Path,
) -> None:
    with TestbedProcess(6, 30, seed=4, workdir=tmp_path / "tb") as tb:
        out = tmp_path / "out"
        first = summary_of(
            crawl(
                *tb.seeds,
                "--out",
                str(out),
                "--dns-server",
                f"127.0.0.1:{tb.dns_port}",
                "--allow-network",
                "127.0.10.0/24",
                "--host-delay",
                "0.01",
                "--max-pages",
                "30",
            )
        )
        assert 0 < settled(out) <= 30 and first["pages_fetched"] > 0
        remembered = json.loads((out / "crawl-settings.json").read_text())
        assert remembered["settings"]["dns"]["servers"] == [f"127.0.0.1:{tb.dns_port}"]

        # The total is reached: a bare resume has nothing to do, says so, and fetches nothing.
        if settled(out) == 30:
            again = crawl("--resume", "--out", str(out))
            assert again.returncode == 0 and "--max-pages is 30 in all" in again.stderr

        # A resume whose DNS server answers nothing: not started, one line, every pending URL still pending.
        before = counts(out)
        port = closed_udp_port()
        bad = crawl("--resume", "--out", str(out), "--dns-server", f"127.0.0.1:{port}", "--max-pages", "0")
        lines = [
            ln for ln in bad.stderr.splitlines() if "pipeline.embedded.start resume:" not in ln and ln.strip()
        ]
        assert bad.returncode == 1 and len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], bad.stderr
        assert counts(out) == before and before["pending"] > 0

        # --max-pages 45 at resume: a total, earlier runs included; logged as an override.
        mid = crawl("--resume", "--out", str(out), "--max-pages", "45")
        summary_of(mid)
        assert "scope.max_pages = 45 (flag) overrides the crawl's remembered 30" in mid.stderr
        assert 30 < settled(out) <= 45

        # No limit, no DNS flag, no network flag: the remembered ones make the crawl complete.
        last = summary_of(crawl("--resume", "--out", str(out), "--max-pages", "0"))
        assert not any(k.startswith("dns_") for k in last.get("errors_by_class") or {}), last[
            "errors_by_class"
        ]
        truth = tb.truth(max_depth=20)
        tb.wait_log_flush()
        log = tb.read_access_log()
    fetched = collections.Counter((e["host"], e["path"]) for e in log)
    missing = [u for u in truth["pages"] if fetched[key(u)] == 0]
    assert missing == []
    assert counts(out)["pending"] == 0


HOSTS = 12


def test_resume_after_sigkill_repeats_only_what_was_in_flight(tmp_path: Path) -> None:
    """SIGKILL mid-crawl, then ``--resume``. Judged from outside (pipeline.harness.faults.accounting):
    only the killed crawler's own requests (by the pid in its User-Agent) in flight at the kill or made
    in its last second may be fetched once more, so a resume that ignored the journal (replay) or the
    crawl db, or started over from the seeds, fails; robots.txt comes from the crawl directory's share."""
    env = dict(os.environ, CRAWLFLEET_FETCH_IDENTIFY_PROCESS="true")
    with TestbedProcess(HOSTS, 40, seed=5, workdir=tmp_path / "tb") as tb:
        out = tmp_path / "out"
        start = time.time()
        proc = subprocess.Popen(crawl_cmd(tb, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        wait_requests(tb, 150)
        pids = frozenset({proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))})
        killed_at = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        tb.wait_log_flush()
        before = [e for e in tb.read_access_log() if float(e["t"]) < killed_at]
        summary = run_json(crawl_cmd(tb, out, "--resume"), env=env)
        truth = tb.truth(max_depth=MAX_DEPTH)
        tb.wait_log_flush()
        log = [e for e in tb.read_access_log() if float(e["t"]) >= start - 1.0]
    assert len(before) >= 150 and summary["pages_fetched"] > 0
    acc = account(truth=truth, log=log, stored_urls=stored_urls(out),
                  strike=Strike("crawler", "SIGKILL", killed_at, killed_at, pids))  # fmt: skip
    assert acc.lost == 0, acc.lost_sample
    assert acc.repeats_unexcused == 0, acc.repeated_sample
    assert acc.robots_extra == 0, acc.robots_sample
