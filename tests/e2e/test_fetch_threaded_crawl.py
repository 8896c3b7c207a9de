"""``crawl --fetcher threaded`` (#21 point 8): the requests-futures fetcher crawls the testbed end to end.

Judged from the testbed's access log: every truth page exactly once, every redirect hop fetched, robots
honoured; and the SSRF guard holds on redirects: hostile.crawl.test's /ssrf-redirect and /ip-redirect
point at 127.0.0.53, where a canary listens and must never see a connection, and end as failed URLs.
Run with the fetcher in the crawl's process and in a fetch process, with --warc (one verified response
record per request the testbed saw). The summary names the fetcher.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.base import UrlState
from pipeline.storage.sqlite import SqliteStore

pytestmark = pytest.mark.e2e
MAX_DEPTH = 12
FORBIDDEN = "127.0.0.53"


class Canary:
    """Counts every TCP connection accepted on ``FORBIDDEN`` at the given ports."""

    def __init__(self, ports: list[int]) -> None:
        self.hits: list[tuple[str, int]] = []
        self.socks = []
        for port in ports:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((FORBIDDEN, port))
            s.listen(16)
            s.settimeout(0.2)
            self.socks.append(s)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in self.socks]
        for t in self._threads:
            t.start()

    def _accept(self, s: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = s.accept()
            except OSError:
                continue
            self.hits.append(peer[:2])
            conn.close()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        for s in self.socks:
            s.close()


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[tuple[TestbedProcess, Canary]]:
    tb = TestbedProcess(10, 30, seed=4, hostile=True, workdir=tmp_path / "tb").start()
    canary = Canary([tb.port, tb.hostile_port])
    yield tb, canary
    canary.close()
    tb.close()


def _key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else ""))


@pytest.mark.parametrize("processes", [0, 1], ids=["in-process", "fetch-process"])
def test_threaded_crawl_fetches_every_page_once_and_keeps_the_guard(
    bed: tuple[TestbedProcess, Canary], tmp_path: Path, processes: int
) -> None:
    tb, canary = bed
    hostile = [tb.hostile_url("/ssrf-redirect"), tb.hostile_url("/ip-redirect")]
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, *hostile, "--fetcher", "threaded",
        "--out", str(out), "--dns-server", tb.dns_server, "--allow-network", "127.0.10.0/24",
        "--max-depth", str(MAX_DEPTH), "--host-delay", "0.01", "--concurrency", "32", "--json", "--no-progress", "--warc",
    ]  # fmt: skip
    env = dict(os.environ, CRAWLFLEET_FETCH_PROCESSES=str(processes))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["fetcher"] == "threaded"

    tb.wait_log_flush()
    counts = collections.Counter((e["host"], e["path"]) for e in tb.read_access_log())
    truth = tb.truth(max_depth=MAX_DEPTH)
    missing = [u for u in truth["pages"] if counts[_key(u)] == 0]
    twice = [u for u in truth["pages"] if counts[_key(u)] > 1]
    assert not missing, missing[:10]
    assert not twice, twice[:10]
    assert truth["redirect_hops"] and all(counts[_key(u)] == 1 for u in truth["redirect_hops"])
    assert not [u for u in truth["forbidden"] if counts[_key(u)]]  # robots.txt honoured

    assert canary.hits == []  # nothing ever connected to the forbidden address
    # The threaded fetcher archives too: one response record per request the testbed saw, verified by warcio.
    warcs = sorted((out / "warc").glob("*.warc.gz"))
    warcio = shutil.which("warcio") or str(Path(sys.executable).with_name("warcio"))
    check = subprocess.run([warcio, "check", *map(str, warcs)], capture_output=True, text=True, check=False)
    assert warcs and check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    responses = 0
    for path in warcs:
        with open(path, "rb") as fh:
            responses += sum(1 for rec in ArchiveIterator(fh) if rec.rec_type == "response")
    assert responses == len(tb.read_access_log())
    store = SqliteStore(out / "crawl.db")
    try:
        final = {p.url: p.final_url for p in store.iter_pages()}
        for url in hostile:
            rec = store.get_url(url)
            if rec is not None and rec.state is UrlState.DONE and rec.status in (301, 302, 303, 307, 308):
                # A fetch process does not follow a redirect (fetchers.redirects): its target is crawled
                # as a link of its own, and that is the URL the guard refuses.
                rec = store.get_url(final[url])
            assert rec is not None and rec.state is UrlState.FAILED, (url, rec)
            assert rec.error.split(":")[0] in ("ssrf_blocked", "out_of_scope"), rec.error
    finally:
        store.close()
