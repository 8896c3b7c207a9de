"""Link-jobs rounds shared through the store (``pipeline.transport.links.rounds``), on a real SQLite store with
an injected lease clock: claims split candidates between two services, a dead service's round is taken over
with its segments and merge id, a round that died while claiming is completed, merge ids sort in merge order
(``hbase_inlinks.ordered``) even when the wall clock steps back, and a finished round leaves nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.storage.hbase_inlinks import ordered
from pipeline.storage.leases import Leases
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.links import rounds as linkrounds
from pipeline.transport.links.rounds import CLAIMING, ROUND, RoundBook
from tests.unit.test_core import Clock


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with SqliteStore(tmp_path / "c.db") as s:
        yield s


def book(store: SqliteStore, owner: str, clock: Clock) -> RoundBook:
    return RoundBook(store, Leases(store, owner=owner, ttl_s=10, skew_s=2, clock=clock))


def test_two_services_claim_disjoint_segments(store: SqliteStore) -> None:
    clock = Clock()
    a, b = book(store, "a", clock), book(store, "b", clock)
    ra = a.open(["n1/x", "n1/y"])
    rb = b.open(["n1/y", "n1/z"])  # listed before a's claims were visible to it
    assert ra is not None and rb is not None
    assert ra[0].segments == ("n1/x", "n1/y") and rb[0].segments == ("n1/z",)
    assert b.open(["n1/x"]) is None  # nothing left to claim: no round
    assert a.claims() == {"n1/x": ra[0].id, "n1/y": ra[0].id, "n1/z": rb[0].id}
    assert a.orphans() == [] == b.orphans()


def test_a_dead_services_round_is_taken_over_with_its_segments_and_merge_id(store: SqliteStore) -> None:
    clock = Clock()
    a, b = book(store, "a", clock), book(store, "b", clock)
    rnd, lease = a.open(["n1/x", "n2/y"])  # type: ignore[misc]
    merging = a.begin_merge(rnd, lease)
    assert merging is not None and ordered(merging.mid.encode())
    assert b.take_over(rnd.id) is None and b.orphans() == []  # a is alive
    clock.now += 12  # a died: its lease ran out, plus the skew
    assert b.orphans() == [rnd.id] and b.merging() == [rnd.id]
    taken = b.take_over(rnd.id)
    assert taken is not None
    again, lease_b = taken
    assert again == merging and lease_b.gen == lease.gen + 1  # same segments, same merge id
    assert b.begin_merge(again, lease_b) == merging
    b.forget(again, lease_b)
    assert b.claims() == {} and b.orphans() == [] and list(store.scan_meta("lease:links:round")) == []


def test_a_round_that_died_while_claiming_is_completed_by_its_new_owner(store: SqliteStore) -> None:
    clock = Clock()
    a, b = book(store, "a", clock), book(store, "b", clock)
    rid = linkrounds.round_id(1)
    assert a.leases.acquire(ROUND + rid) is not None
    assert a._write(rid, None, ["n1/x", "n1/y", "n1/z"], CLAIMING) is not None
    assert a._claim("n1/x", rid)  # then a died
    other = b.open(["n1/z"])  # another service took one of its candidates meanwhile
    assert other is not None
    clock.now += 12
    taken = b.take_over(rid)
    assert taken is not None and taken[0].segments == ("n1/x", "n1/y")


def test_merge_ids_sort_in_merge_order_when_the_clock_steps_back(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    a = book(store, "a", clock)
    rounds = [a.open([f"n1/{i}"]) for i in range(4)]
    ticks = iter([5_000, 4_000, 4_000, 1_000])
    monkeypatch.setattr(linkrounds.time, "time_ns", lambda: next(ticks))
    mids = []
    for taken in rounds:
        assert taken is not None
        merged = a.begin_merge(*taken)
        assert merged is not None
        mids.append(merged.mid)
    assert mids == sorted(mids) and len(set(mids)) == 4 and all(ordered(m.encode()) for m in mids)
    assert a.merging() == [r[0].id for r in rounds if r is not None]  # in merge-id order


def test_a_paused_owner_cannot_begin_a_merge_after_its_lease_ran_out(store: SqliteStore) -> None:
    clock = Clock()
    a = book(store, "a", clock)
    taken = a.open(["n1/x"])
    assert taken is not None
    clock.now += 9  # within ttl, but inside the skew margin of the holder's own view
    assert a.begin_merge(*taken) is None
