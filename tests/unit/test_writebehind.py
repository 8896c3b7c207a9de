"""Write-behind: order, checkpoints after outcomes, the unapplied set, failures, and back-pressure."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from pipeline.storage.base import Outcome, UrlRecord, UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.storage.writebehind import LockedStore, WriteBehind, WriteJob
from pipeline.urls import fingerprint, host_of


def rec(url: str) -> UrlRecord:
    return UrlRecord(url, fingerprint(url), host_of(url), 0)


def done(r: UrlRecord) -> Outcome:
    return Outcome(url=r.url, url_id=r.url_id, state=UrlState.DONE, status=200, fetched_at=1.0)


class GatedStore(LockedStore):
    """A real SQLite store whose record_results waits for a gate and can be told to fail."""

    def __init__(self, inner: SqliteStore) -> None:
        super().__init__(inner)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail = False
        self.calls: list[str] = []

    def record_results(self, outcomes: Sequence[Outcome]) -> int:
        self.entered.set()
        assert self.gate.wait(30), "test gate never opened"
        if self.fail:
            raise OSError("disk full")
        self.calls.append(f"results:{len(outcomes)}")
        return super().record_results(outcomes)

    def put_meta(self, key: str, value: str) -> None:
        self.calls.append(f"meta:{value}")
        super().put_meta(key, value)


@pytest.fixture
def store(tmp_path: Path) -> GatedStore:
    return GatedStore(SqliteStore(tmp_path / "crawl.db"))


def test_jobs_apply_in_order_and_the_checkpoint_follows_its_outcomes(store: GatedStore) -> None:
    recs = [rec(f"http://a.test/{i}") for i in range(6)]
    store.add_urls(recs)
    w = WriteBehind(store)
    w.submit(WriteJob([done(r) for r in recs[:3]]))
    w.submit(WriteJob([done(r) for r in recs[3:]], checkpoint="seg-0:100"))
    w.submit(WriteJob((), checkpoint="seg-0:200"))
    w.close()
    assert store.calls == ["results:3", "results:3", "meta:seg-0:100", "meta:seg-0:200"]
    assert store.counts()["done"] == 6 and store.get_meta("journal_checkpoint") == "seg-0:200"


def test_unapplied_ids_cover_queued_outcomes_until_applied(store: GatedStore) -> None:
    recs = [rec(f"http://a.test/{i}") for i in range(3)]
    store.add_urls(recs)
    store.gate.clear()
    w = WriteBehind(store)
    w.submit(WriteJob([done(recs[0]), done(recs[1])]))
    assert store.entered.wait(30)
    # The writer is inside the job: the store still shows both URLs PENDING, the set must name them.
    assert w.unapplied_ids() == {recs[0].url_id, recs[1].url_id}
    assert {r.url_id for r in store.pending("a.test", 10)} == {r.url_id for r in recs}
    store.gate.set()
    w.drain()
    assert w.unapplied_ids() == set()
    assert [r.url_id for r in store.pending("a.test", 10)] == [recs[2].url_id]
    w.close()


def test_a_writer_failure_reaches_the_caller_and_stops_later_jobs(store: GatedStore) -> None:
    r = rec("http://a.test/x")
    store.add_urls([r])
    store.fail = True
    w = WriteBehind(store)
    w.submit(WriteJob([done(r)]))
    with pytest.raises(RuntimeError, match="write-behind failed"):
        w.drain()
    with pytest.raises(RuntimeError):
        w.submit(WriteJob((), checkpoint="seg-0:1"))
    with pytest.raises(RuntimeError):
        w.close()
    assert store.get_meta("journal_checkpoint") is None  # the checkpoint never passed the failure


def test_submit_blocks_while_the_queue_is_full(store: GatedStore) -> None:
    recs = [rec(f"http://a.test/{i}") for i in range(3)]
    store.add_urls(recs)
    store.gate.clear()
    w = WriteBehind(store, max_jobs=1)
    w.submit(WriteJob([done(recs[0])]))
    assert store.entered.wait(30)
    returned = threading.Event()

    def second() -> None:
        w.submit(WriteJob([done(recs[1])]))
        returned.set()

    t = threading.Thread(target=second)
    t.start()
    assert not returned.is_set()  # the first job still holds the only place
    store.gate.set()
    t.join(30)
    assert returned.is_set()
    w.close()
    assert store.counts()["done"] == 2


def test_reads_and_writes_from_the_caller_interleave_safely_with_the_writer(store: GatedStore) -> None:
    """The caller keeps adding URLs and reading pending rows while the writer commits outcomes."""
    w = WriteBehind(store, max_jobs=2)
    for round_ in range(40):
        batch = [rec(f"http://a.test/{round_}/{i}") for i in range(20)]
        assert len(store.add_urls(batch)) == 20
        w.submit(WriteJob([done(r) for r in batch], checkpoint=f"seg-0:{round_}"))
        skip = w.unapplied_ids()
        assert all(r.url_id in skip for r in store.pending("a.test", 1000))
    w.close()
    assert store.counts()["done"] == 800 and store.counts()["pending"] == 0
