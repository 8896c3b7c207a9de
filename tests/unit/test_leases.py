"""Owner leases over a store's shared records (``pipeline.storage.leases``), on a real SQLite store with an
injected clock: one holder at a time, takeover after the deadline plus the skew margin with the next
generation, a holder's own view ending the margin early, and a swap whose reply was lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.storage.leases import Lease, Leases
from pipeline.storage.sqlite import SqliteStore
from tests.unit.test_core import Clock


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with SqliteStore(tmp_path / "c.db") as s:
        yield s


def test_one_holder_at_a_time_and_takeover_only_after_deadline_and_skew(store: SqliteStore) -> None:
    clock = Clock()
    a = Leases(store, owner="a", ttl_s=10, skew_s=2, clock=clock)
    b = Leases(store, owner="b", ttl_s=10, skew_s=2, clock=clock)
    la = a.acquire("round:1")
    assert la is not None and la.gen == 1 and la.until == clock.now + 10
    assert b.acquire("round:1") is None
    t0 = la.until - 10
    clock.now = t0 + 9  # a's own view ends skew_s before the deadline: it must not act any more
    assert not a.valid(la) and b.acquire("round:1") is None
    clock.now = t0 + 11.9  # past the deadline, within the skew: still not free for others
    assert b.acquire("round:1") is None
    clock.now = t0 + 12
    lb = b.acquire("round:1")
    assert lb is not None and lb.gen == 2 and lb.owner == "b"
    assert a.renew(la) is None  # a woke up: it lost the lease


def test_renew_and_release(store: SqliteStore) -> None:
    clock = Clock()
    a = Leases(store, owner="a", ttl_s=10, skew_s=2, clock=clock)
    b = Leases(store, owner="b", ttl_s=10, skew_s=2, clock=clock)
    la = a.acquire("x")
    assert la is not None
    clock.now += 5
    la2 = a.renew(la)
    assert la2 is not None and la2.until == clock.now + 10 and la2.gen == la.gen
    assert a.renew(la) is None  # an old copy is no longer the record
    a.release(la2)
    lb = b.acquire("x")
    assert lb is not None and lb.gen == 2  # free at once after a release
    assert a.acquire("x") is None


def test_reacquiring_ones_own_lease_keeps_the_generation(store: SqliteStore) -> None:
    a = Leases(store, owner="a", ttl_s=10, skew_s=2, clock=Clock())
    first = a.acquire("x")
    again = a.acquire("x")
    assert first is not None and again is not None and again.gen == first.gen


def test_a_swap_whose_reply_was_lost_counts_as_done(store: SqliteStore) -> None:
    class LossyReply:
        """The swap happens, but the caller hears False (the reply lost and the retry found it done)."""

        def __init__(self, inner: SqliteStore) -> None:
            self.inner = inner

        def get_meta(self, key: str) -> str | None:
            return self.inner.get_meta(key)

        def swap_meta(self, key: str, expected: str | None, new: str) -> bool:
            self.inner.swap_meta(key, expected, new)
            return False

    a = Leases(LossyReply(store), owner="a", ttl_s=10, skew_s=2, clock=Clock())  # type: ignore[arg-type]
    lease = a.acquire("x")
    assert lease is not None and Lease.decode("x", store.get_meta("lease:x")) == lease


def test_garbage_in_a_lease_record_reads_as_no_lease_and_ttl_must_exceed_the_skew(store: SqliteStore) -> None:
    store.put_meta("lease:x", "not json")
    a = Leases(store, owner="a", ttl_s=10, skew_s=2, clock=Clock())
    assert a.holder("x")[0] is None
    assert a.acquire("x") is not None  # swapped over the garbage
    with pytest.raises(ValueError, match="ttl_s"):
        Leases(store, owner="a", ttl_s=4, skew_s=2)
