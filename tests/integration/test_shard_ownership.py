"""Dispatcher shards' shared records on both real stores (SQLite, and HBase through Thrift's checkAndPut):
one process per shard (``pipeline.storage.shardleases``: a second owner refused in one line, a dead shard's
lease taken over with the next generation and its holder fenced), and one owner per host
(``pipeline.storage.hostowners``: claims, transit, takeover, each a compare-and-set on the generation).

The clock is injected; the lease keeper's thread never renews within a test (heartbeat 30 s)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.storage.base import Store
from pipeline.storage.hostowners import IN_TRANSIT, HostOwners
from pipeline.storage.shardleases import DONE, TAKEN, ShardLease, ShardTaken, live_shards, timing
from pipeline.storage.sqlite import SqliteStore
from tests.unit.test_core import Clock

pytestmark = [pytest.mark.integration]

HB = 30.0  # shard heartbeat: ttl 45 s, skew 3.75 s


@pytest.fixture(params=["sqlite", "hbase"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, object]]:
    """(a store, a function opening another connection to the same store)."""
    if request.param == "sqlite":
        path = tmp_path / "crawl.db"

        def open_store() -> Store:
            return SqliteStore(path)
    else:
        from pipeline.storage.hbase import HBaseStore

        host, port = request.getfixturevalue("hbase_thrift")
        prefix = f"{request.getfixturevalue('hbase_prefix')}sh{uuid.uuid4().hex[:4]}"

        def open_store() -> Store:
            return HBaseStore(host, port, prefix=prefix)

    store = open_store()
    yield store, open_store
    store.close()


def lease(store: Store, open_store: object, shard: int, clock: Clock, owner: str) -> ShardLease:
    return ShardLease(store, open_store, "svc", shard, heartbeat_s=HB, owner=owner, clock=clock)  # type: ignore[arg-type]


def test_a_second_process_for_a_shard_is_refused_in_one_line(opener: tuple[Store, object]) -> None:
    store, open_store = opener
    clock = Clock()
    first = lease(store, open_store, 1, clock, "host-a:11:x")
    got = first.join()
    assert got.gen == 1 and first.holds()
    second = lease(store, open_store, 1, clock, "host-b:22:y")
    with pytest.raises(ShardTaken) as refused:
        second.join()
    line = str(refused.value)
    assert "\n" not in line and "shard 1" in line and "'svc'" in line and "host-a:11:x" in line, line
    # Another shard of the service is its own lease.
    other = lease(store, open_store, 2, clock, "host-b:22:y")
    assert other.join().gen == 1
    assert live_shards(store, "svc", now=clock.now, skew_s=HB / 8) == [1, 2]
    first.leave(done=False)
    other.leave(done=True)
    # Released: a new process may start shard 1 at once; the next generation fences the old one.
    assert second.join().gen == 2
    second.leave(done=True)


def test_a_dead_shard_is_taken_over_with_the_next_generation_and_its_holder_fenced(
    opener: tuple[Store, object],
) -> None:
    store, open_store = opener
    clock = Clock()
    ttl, skew = timing(HB)
    dead = lease(store, open_store, 0, clock, "a")
    peer = lease(store, open_store, 1, clock, "b")
    third = lease(store, open_store, 2, clock, "c")
    dead.join()
    peer.join()
    third.join()
    assert peer.dead_peers(3) == []
    clock.now += ttl - skew  # the holder's own view ends first: it stops acting, nobody may take over yet
    assert not dead.holds() and peer.dead_peers(3) == []
    clock.now += 2 * skew
    found = peer.dead_peers(3)  # nobody renewed on this clock: 0 and 2 both look dead to shard 1
    assert [d.shard for d in found] == [0, 2]
    d0 = found[0]
    taken = peer.take_over(d0)
    assert taken is not None and taken.gen == 2 and taken.owner.startswith("takeover:")
    assert third.take_over(d0) is None  # one taker only
    # The old holder wakes up: its renewal fails, it knows it is no longer the shard.
    assert dead.leases.renew(dead.lease) is None  # type: ignore[arg-type]
    peer.taken(taken)
    from pipeline.storage.shardleases import shard_leases

    assert shard_leases(store, "svc")[0].owner.startswith(TAKEN)
    assert 0 not in [d.shard for d in third.dead_peers(3)]  # taken over once, not again
    restarted = lease(store, open_store, 0, clock, "a2")
    assert restarted.join().gen == 3
    for s in (restarted, peer, third):
        s.leave(done=True)
    # Shards that ended with nothing left are not dead peers: nothing to take over.
    clock.now += 10 * ttl
    watcher = lease(store, open_store, 3, clock, "w")
    watcher.join()
    assert watcher.dead_peers(4) == []
    from pipeline.storage.shardleases import shard_leases

    owners = {s: lease.owner for s, lease in shard_leases(store, "svc").items() if s != 3}
    assert all(o.startswith(DONE) for o in owners.values()), owners
    watcher.leave(done=True)


def test_one_owner_per_host_through_every_change_of_hands(opener: tuple[Store, object]) -> None:
    store, _ = opener
    clock = Clock()
    a, b = HostOwners(store, "svc", clock=clock), HostOwners(store, "svc", clock=clock)
    mine, other = a.claim("h1.test", 0)
    assert mine is not None and mine.shard == 0 and mine.gen == 1 and other is None
    # A second claimant sees the owner, and takes nothing.
    got, seen = b.claim("h1.test", 1)
    assert got is None and seen is not None and seen.shard == 0
    # Shard 0 pushes it (S5's surplus): in transit, with its clock, address and page count.
    moving = a.push(mine, pending=40, not_before=clock.now + 3, ip="10.0.0.7", issued=12)
    assert moving is not None and moving.in_transit and moving.gen == 2 and moving.pushed_by == 0
    # New links for it while in transit are counted on the record; the block's generation still holds.
    assert b.add_in_transit("h1.test", 5) is not None
    # A stale copy of the owner record no longer swaps (shard 0 cannot push it twice).
    assert a.push(mine, pending=1, not_before=0, ip="", issued=0) is None
    # Two shards pull the same block (a redelivery): one takes it, the other finds it moved on.
    took = b.take("h1.test", 2, 1)
    assert took is not None and took.shard == 1 and took.gen == 3
    assert took.pending == 45 and took.ip == "10.0.0.7" and took.issued == 12
    assert a.take("h1.test", 2, 0) is None
    # A peer takes over shard 1's hosts (it died): the next generation; the pusher's stale copy is refused.
    moved = a.reassign(took, 2)
    assert moved is not None and moved.shard == 2 and moved.gen == 4
    assert b.reassign(took, 0) is None
    assert [(o.host, o.shard, o.gen) for o in a.scan()] == [("h1.test", 2, 4)]
    assert a.read("h1.test") is not None and IN_TRANSIT == -1


def test_a_host_nobody_owns_is_claimed_once_by_racing_shards(opener: tuple[Store, object]) -> None:
    store, _ = opener
    owners = [HostOwners(store, "svc2") for _ in range(3)]
    hosts = [f"h{i}.race" for i in range(20)]
    won: dict[str, list[int]] = {h: [] for h in hosts}
    for h in hosts:  # every shard claims every host, in a different order each time
        for s in sorted(range(3), key=lambda s: hash((h, s))):
            mine, _ = owners[s].claim(h, s)
            if mine is not None:
                won[h].append(s)
    assert all(len(ws) == 1 for ws in won.values()), won
    assert {o.host: o.shard for o in owners[0].scan()} == {h: ws[0] for h, ws in won.items()}
