"""Ctrl-C on the embedded crawl (#21 point 4), judged from the testbed's access log.

The crawler runs as a real subprocess in a session of its own and gets SIGINT on its process group,
as a terminal's Ctrl-C does, once it has made a few hundred requests:
- first Ctrl-C: it exits 130, says "interrupted; resume with: CMD", its JSON summary says interrupted;
  the requests the testbed started after a sentinel request sent right after the signal
  (``TestbedProcess.mark``: the server's own clock, no comparison with the test's) are no more than the
  crawl's concurrency (what was in flight). Running CMD finishes the crawl with every truth page fetched,
  and repeated only as the fault judge allows (pipeline.harness.faults.accounting: requests the
  interrupted processes, by their pids, had in flight or made in their last second).
- second Ctrl-C: it exits 130 at once; the WARC written so far passes ``warcio check``; nothing journaled
  is fetched again by the resume, and the resume still fetches every truth page.
"""

from __future__ import annotations

import collections
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest

from pipeline.harness.faults.accounting import Strike, account
from pipeline.harness.testbed.harness import SENTINEL_HOST, TestbedProcess
from pipeline.storage.journal import replay

pytestmark = pytest.mark.e2e
CONCURRENCY = 8
MAX_DEPTH = 12
MARK = "interrupted; resume with: "


def _cmd(tb: TestbedProcess, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out), "--dns-server", tb.dns_server,
        "--allow-network", "127.0.10.0/24", "--max-depth", str(MAX_DEPTH), "--host-delay", "0.05",
        "--concurrency", str(CONCURRENCY), "--json", "--no-progress", *extra,
    ]  # fmt: skip


def _key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else ""))


def _interrupt(
    tb: TestbedProcess, out: Path, *extra: str, after: int, twice: bool, processes: int = 0
) -> tuple[subprocess.CompletedProcess[str], Strike]:
    """Start the crawl (``processes`` fetch processes), Ctrl-C it (twice: again once the first is handled) once
    the testbed logged ``after`` requests. Returns the finished process and the strike, timed by a sentinel
    request sent right after the (last) signal."""
    env = dict(os.environ, CRAWLFLEET_FETCH_PROCESSES=str(processes), CRAWLFLEET_FETCH_IDENTIFY_PROCESS="true")
    proc = subprocess.Popen(_cmd(tb, out, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)  # fmt: skip
    try:
        while len(tb.read_access_log()) < after:
            assert proc.poll() is None, "the crawl ended before it could be interrupted"
            time.sleep(0.05)
        pids = frozenset({proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))})
        os.killpg(proc.pid, signal.SIGINT)
        if twice:
            # The second Ctrl-C once the first was handled (two SIGINTs pending at once are one), and at
            # once then: sent after the sentinel request below, under load it came after the crawl had
            # finished its requests in flight and stopped on its own.
            lines, pump = _pump_stderr(proc, "stopping: no new requests")
            os.killpg(proc.pid, signal.SIGINT)
        sent_at = tb.mark("sigint")  # the server's time of a request sent right after the signal
        if twice:
            assert proc.stdout is not None
            stdout = proc.stdout.read()
            proc.wait(timeout=120)  # a hang guard only
            pump.join(timeout=30)
            stderr = "".join(lines)
        else:
            stdout, stderr = proc.communicate(timeout=120)  # a hang guard only
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), Strike(
        "crawler", "SIGINT", sent_at, sent_at, pids)


def _pump_stderr(proc: subprocess.Popen[str], text: str, *, timeout_s: float = 60.0) -> tuple[list[str], threading.Thread]:
    """Read the crawl's stderr on a thread into the list returned; return once a line holds ``text`` (or
    stderr ended, or ``timeout_s``: a bound, no verdict)."""
    assert proc.stderr is not None
    stream, lines, seen = proc.stderr, [], threading.Event()

    def pump() -> None:
        for line in stream:
            lines.append(line)
            if text in line:
                seen.set()
        seen.set()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    seen.wait(timeout_s)
    return lines, thread


def _resume(stderr: str) -> dict[str, Any]:
    line = next(ln for ln in stderr.splitlines() if MARK in ln)
    cmd = shlex.split(line.split(MARK, 1)[1])
    assert "--resume" in cmd
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert not summary["interrupted"]
    return summary


@pytest.fixture
def testbed(tmp_path: Path) -> Any:
    tb = TestbedProcess(20, 50, seed=3, workdir=tmp_path / "tb").start()
    yield tb
    tb.close()


@pytest.mark.parametrize("processes", [0, 2], ids=["in-process", "fetch-processes"])
def test_first_ctrl_c_stops_new_requests_and_resume_finishes_exactly_once(
    testbed: TestbedProcess, tmp_path: Path, processes: int
) -> None:
    tb = testbed
    done, strike = _interrupt(tb, tmp_path / "out", after=200, twice=False, processes=processes)
    assert done.returncode == 130, done.stderr[-3000:]
    assert "stopping: no new requests" in done.stderr and MARK in done.stderr
    assert "Traceback" not in done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["interrupted"] is True
    abandoned = summary.get("abandoned", [])
    assert len(abandoned) <= CONCURRENCY

    tb.wait_log_flush()
    first = [e for e in tb.read_access_log() if e["host"] != SENTINEL_HOST]
    late = [e for e in first if e["t"] > strike.fault_t]  # started by the server after the sentinel
    # Only what was already on the wire: at most the concurrency of each fetcher (a process has its own).
    assert len(late) <= CONCURRENCY * max(1, processes), late

    _resume(done.stderr)
    tb.wait_log_flush()
    log = [e for e in tb.read_access_log() if e["host"] != SENTINEL_HOST]
    counts = collections.Counter((e["host"], e["path"]) for e in log)
    truth = tb.truth(max_depth=MAX_DEPTH)
    missing = [u for u in truth["pages"] if counts[_key(u)] == 0]
    assert not missing, missing[:10]
    acc = account(truth=truth, log=log, stored_urls=set(), strike=strike)  # the store: the resume's summary
    assert acc.repeats_unexcused == 0 and acc.robots_extra == 0, (acc.repeated_sample, acc.robots_sample)


@pytest.mark.parametrize("processes", [0, 1], ids=["in-process", "fetch-process"])
def test_second_ctrl_c_quits_at_once_and_loses_nothing_journaled(
    testbed: TestbedProcess, tmp_path: Path, processes: int
) -> None:
    tb = testbed
    out = tmp_path / "out"
    done, _ = _interrupt(tb, out, "--warc", after=200, twice=True, processes=processes)
    assert done.returncode == 130, done.stderr[-3000:]
    assert "quitting now (second Ctrl-C)" in done.stderr and MARK in done.stderr
    assert "Traceback" not in done.stderr
    journaled = {_key(u) for r in replay(out / "segments", None) if r.ok for u in (r.url, r.final_url)}
    assert journaled
    # The WARC written up to the quit is whole: every record it holds reads back and verifies.
    warcs = sorted((out / "warc").glob("*.warc.gz"))
    warcio = shutil.which("warcio") or str(Path(sys.executable).with_name("warcio"))
    check = subprocess.run([warcio, "check", *map(str, warcs)], capture_output=True, text=True, check=False)
    assert warcs and check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]

    _resume(done.stderr)
    tb.wait_log_flush()
    counts = collections.Counter((e["host"], e["path"]) for e in tb.read_access_log())
    truth = tb.truth(max_depth=MAX_DEPTH)
    assert not [u for u in truth["pages"] if counts[_key(u)] == 0]
    refetched = [k for k in journaled if counts[k] > 1]
    assert not refetched, refetched[:10]  # a journaled page is never fetched again
