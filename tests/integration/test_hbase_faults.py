"""Faults: the Thrift server dies (SIGKILL) and comes back while the HBase store is writing.

A private Thrift server on a free port (same HBase master) is killed mid-write and restarted, so the
shared server on 9090 that other tests use is never disturbed. Expectation: the store's calls block
and retry across the outage, and afterwards every page and state is there (0 lost, 0 doubled).
"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.storage.base import Outcome, PageRecord, UrlRecord, UrlState
from pipeline.storage.hbase import HBaseStore
from pipeline.urls import fingerprint, host_of
from tests.fixtures.hbase import ROOT, drop_prefix, thrift_answers

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ThriftProcess:
    """A second Thrift1 server, run by ``svc-hbase.sh thrift-run PORT`` (which execs the JVM)."""

    def __init__(self, port: int, log: Path) -> None:
        self.port, self.log = port, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 240.0) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(ROOT / "scripts" / "svc-hbase.sh"), "thrift-run", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not thrift_answers("127.0.0.1", self.port):
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "private thrift server did not answer"
            time.sleep(0.5)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)


@pytest.fixture
def private_thrift(hbase_thrift: tuple[str, int], tmp_path: Path) -> Iterator[ThriftProcess]:
    server = ThriftProcess(free_port(), tmp_path / "thrift.log")
    server.start()
    yield server
    server.kill()


def make_page(url: str, i: int) -> PageRecord:
    return PageRecord(url, fingerprint(url), url, 200, "text/html", f"<p>{i}</p>".encode() * 500, float(i))


def test_thrift_restart_mid_write_loses_nothing(private_thrift: ThriftProcess, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="pipeline.storage.hbase")
    prefix = f"fault{int(time.time() * 1000) % 10**9}"
    store = HBaseStore("127.0.0.1", private_thrift.port, prefix=prefix, batch_size=20, retry_seconds=300)
    try:
        urls = [f"http://f{i % 6}.test/p/{i}" for i in range(600)]
        store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 1) for u in urls[:300]])
        killed = threading.Event()

        def kill_and_restart() -> None:
            killed.wait(60)
            private_thrift.kill()
            time.sleep(1.0)  # a real outage: every call in this window fails to connect
            private_thrift.start()

        chaos = threading.Thread(target=kill_and_restart)
        chaos.start()
        applied = 0
        for n, start in enumerate(range(0, 600, 30)):
            chunk = urls[start : start + 30]
            if start >= 300:  # the second half is discovered during the outage
                store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 1) for u in chunk])
            outs = [Outcome(u, fingerprint(u), UrlState.DONE, 200, 1.0, page=make_page(u, start + j))
                    for j, u in enumerate(chunk)]  # fmt: skip
            applied += store.record_results(outs)
            if n == 3:
                t_kill = time.monotonic()
                killed.set()
        chaos.join()
        outage = time.monotonic() - t_kill
        retried = [r for r in caplog.records if "Retrying" in r.getMessage()]
        assert retried, "the outage should have forced retries"
        assert applied == 600
        assert store.pending_hosts() == []
        for i, u in enumerate(urls):
            rec = store.get_url(u)
            assert rec is not None and rec.state == UrlState.DONE, u
            assert store.get_page(u) == make_page(u, i)
        assert sum(1 for _ in store.iter_pages()) == 600
        recount = store.recount()
        assert (recount["done"], recount["pages"], recount["pending"]) == (600, 600, 0)
        assert store.counts()["done"] == 600
        print(f"outage+recovery {outage:.1f}s, {len(retried)} retried calls")
    finally:
        store.close()
        drop_prefix(prefix)


def test_a_dispatcher_resume_makes_drifted_counters_exact_before_using_them(
    hbase_thrift: tuple[str, int], hbase_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counters kept by increments drift upward when a retried increment had landed (the contract above).
    ``dispatcher --resume --max-pages N`` reads them for the total: drifted, it would refuse to go on (or
    stop early) and report wrong counts. The resume recounts first (``Store.reconcile_counts``)."""
    from pipeline.cli import build_parser
    from pipeline.transport.cli import _resumed_settings

    host, port = hbase_thrift
    urls = [f"http://drift{i % 2}.test/p{i}" for i in range(10)]
    store = HBaseStore(host, port, prefix=hbase_prefix, batch_size=50, retry_seconds=30)
    try:
        store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 0) for u in urls])
        store.record_results([Outcome(u, fingerprint(u), UrlState.DONE, 200, 1.0) for u in urls])
        store._increment([("meta", b"counts", b"c:done", 20)])  # a retried increment that had landed, twice over
        assert store.counts()["done"] == 30
    finally:
        store.close()
    for name, value in {"KIND": "hbase", "HBASE_HOST": host, "HBASE_PORT": str(port), "HBASE_PREFIX": hbase_prefix}.items():
        monkeypatch.setenv(f"CRAWLFLEET_STORE_{name}", value)
    out = tmp_path / "crawl"
    args = build_parser("dispatcher").parse_args(["dispatcher", "--resume", "--out", str(out), "--max-pages", "25"])
    settings, stop = _resumed_settings(args, out, [])
    assert stop == "" and settings.scope.max_pages == 15  # 10 settled of 25, not 30
    store = HBaseStore(host, port, prefix=hbase_prefix, batch_size=50, retry_seconds=30)
    try:
        assert store.counts()["done"] == 10
    finally:
        store.close()
