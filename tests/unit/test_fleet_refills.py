"""The frontier's refills off the dispatcher's loop (#18 point 3): the reader thread, the host epoch that
keeps a read raced by new URLs from closing a window, the core's background path on a store seam, and
when the dispatcher's loop retries a dispatch round that issued nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.crawl.refills import RefillReader, Refills
from pipeline.frontier.frontier import Frontier
from pipeline.frontier.limits import FrontierLimits
from pipeline.storage.base import UrlRecord
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.dispatcher.tick import RETRY_S, Periodic
from pipeline.urls import fingerprint


def rec(host: str, i: int) -> UrlRecord:
    url = f"http://{host}/p{i}"
    return UrlRecord(url, fingerprint(url), host, 0)


def drained(f: Frontier, host: str, n: int) -> None:
    """``host`` with ``n`` URLs in the store only (what a links report leaves)."""
    f.add_pending(host, n)
    assert f.wants_refill() == [host]


def wait_for(reader: RefillReader) -> list[Any]:
    """Take the reader's answers, waiting for the thread (bounded, not a timing assertion)."""
    got: list[Any] = []
    for _ in range(2000):
        got += reader.take()
        if not reader.in_flight:
            return got
        time.sleep(0.005)
    raise AssertionError("reader never answered")


def test_a_read_raced_by_new_urls_loads_its_rows_but_leaves_the_window_incomplete() -> None:
    f = Frontier(FrontierLimits(window_per_host=8))
    drained(f, "a.test", 2)
    epoch = f.host("a.test").epoch  # type: ignore[union-attr]
    f.add_pending("a.test", 3)  # a links report while the read was out: the read cannot hold those
    f.refill("a.test", [rec("a.test", 0), rec("a.test", 1)], epoch=epoch)
    hs = f.host("a.test")
    assert hs is not None and len(hs.window) == 2 and not hs.complete and hs.pending == 5
    assert [t.url for t in f.lease("n#0", 10, 0.0)] == ["http://a.test/p0", "http://a.test/p1"]
    f.release("n#0", 0.0)
    assert f.wants_refill() == ["a.test"]  # the rest is read next


def test_a_read_with_the_current_epoch_closes_the_window_and_fixes_the_count() -> None:
    f = Frontier(FrontierLimits(window_per_host=8))
    drained(f, "a.test", 5)
    epoch = f.host("a.test").epoch  # type: ignore[union-attr]
    f.refill("a.test", [rec("a.test", 0), rec("a.test", 1)], epoch=epoch)
    hs = f.host("a.test")
    assert hs is not None and hs.complete and hs.pending == 2 and f.pending == 2


def test_add_and_restore_bump_the_epoch() -> None:
    f = Frontier(FrontierLimits(window_per_host=8))
    drained(f, "a.test", 1)
    hs = f.host("a.test")
    assert hs is not None
    before = hs.epoch
    f.add([rec("a.test", 9)])
    assert hs.epoch == before + 1
    f.restore("a.test", 4)
    assert hs.epoch == before + 2


def test_the_reader_answers_each_host_once_and_groups_queued_requests() -> None:
    calls: list[list[str]] = []
    gate = threading.Event()

    def read(hosts: Sequence[str], limit: int) -> Mapping[str, Sequence[UrlRecord]]:
        gate.wait(10)
        calls.append(list(hosts))
        return {h: [rec(h, i) for i in range(limit)] for h in hosts if h != "none.test"}

    reader = RefillReader(read, limit=3)
    try:
        reader.ask([("a.test", 1)], done=frozenset())
        reader.ask([("b.test", 2), ("none.test", 5)], done=frozenset({42}))
        assert set(reader.in_flight) == {"a.test", "b.test", "none.test"}
        gate.set()
        got = {r.host: r for r in wait_for(reader)}
        assert set(got) == {"a.test", "b.test", "none.test"}
        assert len(got["a.test"].records) == 3 and got["b.test"].epoch == 2 and got["none.test"].records == []
        assert 42 in got["b.test"].done and 42 not in got["a.test"].done
        assert sum(len(c) for c in calls) == 3  # each host read once (one or two reads in all)
    finally:
        reader.close()


def test_a_failed_read_is_raised_on_the_callers_thread() -> None:
    def read(hosts: Sequence[str], limit: int) -> Mapping[str, Sequence[UrlRecord]]:
        raise OSError("thrift gone")

    reader = RefillReader(read, limit=3)
    reader.ask([("a.test", 0)], done=frozenset())
    with pytest.raises(OSError, match="thrift gone"):
        for _ in range(2000):
            reader.take()
            time.sleep(0.005)
    reader.close()


def test_background_refills_fill_the_windows_the_store_holds(tmp_path: Path) -> None:
    """Refills.run with a reader over a real SQLite store's ``pending`` (the HBase multi-read is the seam)."""
    store = SqliteStore(tmp_path / "c.db")
    try:
        store.add_urls([rec("a.test", i) for i in range(3)] + [rec("b.test", i) for i in range(12)])
        f = Frontier(FrontierLimits(window_per_host=10))
        f.add_pending("a.test", 3)
        f.add_pending("b.test", 12)
        lock = threading.Lock()  # SQLite: one thread at a time (the reader's reads, the test's)

        def many(hosts: Sequence[str], limit: int) -> dict[str, list[UrlRecord]]:
            with lock:
                return {h: store.pending(h, limit) for h in hosts}

        flushed: list[int] = []
        r = Refills(f, store.pending, read_many=many)
        try:
            r.run(flush=lambda: flushed.append(1), done_ids=frozenset)
            assert r.in_flight == 2 and flushed  # asked (after a flush), nothing applied yet
            for _ in range(2000):  # bounded wait for the thread, not a timing assertion
                r.run(flush=lambda: None, done_ids=frozenset)
                if not r.in_flight:
                    break
                time.sleep(0.005)
            a, b = f.host("a.test"), f.host("b.test")
            assert a is not None and b is not None
            assert len(a.window) == 3 and a.complete
            assert len(b.window) == 10 and not b.complete  # 12 pending: more than the window
            assert r.counts == [1, 1]
        finally:
            r.close()
    finally:
        store.close()


def retry_after(*, in_flight: int = 0, ready: float | None = None, clock: float = 100.25,
                quotas: str = "", s1_said_no: bool = False) -> float:  # fmt: skip
    stub: Any = SimpleNamespace(
        core=SimpleNamespace(refiller=SimpleNamespace(in_flight=in_flight),
                             frontier=SimpleNamespace(next_ready_at=lambda: ready)),
        settings=SimpleNamespace(dispatch=SimpleNamespace(quotas_file=quotas)),
        tick_s=0.5,
        clock=lambda: clock,
    )  # fmt: skip
    return Periodic._retry_after(stub, s1_said_no=s1_said_no)


def test_an_empty_round_is_retried_only_when_work_may_free() -> None:
    assert retry_after(in_flight=3) == RETRY_S  # a refill read may land any moment
    assert retry_after() == 0.5  # all leased: only a reply (a message) frees a host
    assert retry_after(ready=101.0) == pytest.approx(0.75)  # a host's politeness delay ends then
    assert retry_after(ready=99.0) == RETRY_S  # ready but not leasable (per-IP cap): poll
    assert retry_after(s1_said_no=True) == pytest.approx(0.751)  # S1's u grows with the next second
    assert retry_after(quotas="q.toml", ready=101.0) == pytest.approx(0.751)
