"""A crawl directory remembers its settings: ``crawl --resume --out DIR`` alone goes on where the crawl
stopped, with the DNS server, allowed networks and limits it started with; ``--max-pages`` is a total;
a resume that cannot resolve any of its hosts stops with one line and leaves every URL pending.
Judged from the testbed's access log and the crawl db.
"""

from __future__ import annotations

import collections
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.sqlite import SqliteStore

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


def test_resume_remembers_settings_counts_max_pages_in_total_and_never_burns_the_queue(tmp_path: Path) -> None:
    with TestbedProcess(6, 30, seed=4, workdir=tmp_path / "tb") as tb:
        out = tmp_path / "out"
        first = summary_of(crawl(*tb.seeds, "--out", str(out), "--dns-server", f"127.0.0.1:{tb.dns_port}",
                                 "--allow-network", "127.0.10.0/24", "--host-delay", "0.01", "--max-pages", "30"))
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
        lines = [ln for ln in bad.stderr.splitlines() if "pipeline.embedded.start resume:" not in ln and ln.strip()]
        assert bad.returncode == 1 and len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], bad.stderr
        assert counts(out) == before and before["pending"] > 0

        # --max-pages 45 at resume: a total, earlier runs included; logged as an override.
        mid = crawl("--resume", "--out", str(out), "--max-pages", "45")
        summary_of(mid)
        assert "scope.max_pages = 45 (flag) overrides the crawl's remembered 30" in mid.stderr
        assert 30 < settled(out) <= 45

        # No limit, no DNS flag, no network flag: the remembered ones make the crawl complete.
        last = summary_of(crawl("--resume", "--out", str(out), "--max-pages", "0"))
        assert not any(k.startswith("dns_") for k in last.get("errors_by_class") or {}), last["errors_by_class"]
        truth = tb.truth(max_depth=20)
        tb.wait_log_flush()
        log = tb.read_access_log()
    fetched = collections.Counter((e["host"], e["path"]) for e in log)
    missing = [u for u in truth["pages"] if fetched[key(u)] == 0]
    assert missing == []
    assert counts(out)["pending"] == 0
