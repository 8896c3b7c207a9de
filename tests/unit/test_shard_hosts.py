"""A dispatcher shard's hosts (pipeline/transport/dispatcher/shardhosts.py) over a real SQLite store and two real
frontiers, the broker replaced by a list (a seam): the gate, sending on, push and pull of blocks, a block the
broker refuses, a takeover, a transit record left with no block, and a stopped shard's hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.frontier.frontier import Frontier
from pipeline.frontier.limits import FrontierLimits
from pipeline.storage.hostowners import HostOwners
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.dispatcher.shardhosts import ShardHosts, seed_home
from pipeline.transport.wire.shardwire import Block
from tests.unit.test_core import Clock
from tests.unit.test_frontier import urls


def shard(store: SqliteStore, index: int, clock: Clock) -> ShardHosts:
    hosts = ShardHosts(HostOwners(store, "svc", clock=clock), index, clock=clock, wall=clock, transit_grace_s=4.0)
    hosts.shards = 3
    hosts.frontier = Frontier(FrontierLimits(active_hosts=1), admit=hosts.admit)
    return hosts


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with SqliteStore(tmp_path / "c.db") as s:
        yield s


def test_the_gate_claims_at_home_and_sends_on_what_is_anothers(store: SqliteStore) -> None:
    clock = Clock()
    a, b = shard(store, 0, clock), shard(store, 1, clock)
    assert a.frontier is not None and b.frontier is not None
    a.frontier.add(urls("x.test", 3))  # nobody owned it: claimed for shard 0
    b.frontier.add(urls("x.test", 2))  # shard 1 learns of it too (a race): it stays out, 2 URLs kept
    b.frontier.add_pending("x.test", 4)
    assert b.frontier.host("x.test") is None and dict(b.elsewhere) == {"x.test": 6}
    sent: list[tuple[int, dict[str, int]]] = []
    b.forward(lambda s, hosts: sent.append((s, hosts)), live=[0, 1])
    assert sent == [(0, {"x.test": 6})] and not b.elsewhere
    # While re-reading the pending set nothing is sent on, and the owner is remembered (no second read).
    with_restore = shard(store, 2, clock)
    with_restore.restoring = True
    assert not with_restore.admit("x.test", 9) and with_restore.others == {"x.test": 0}
    assert not with_restore.elsewhere


def test_seeds_are_claimed_by_their_home_shard_only(store: SqliteStore) -> None:
    clock = Clock()
    hosts = [f"s{i}.test" for i in range(12)]
    shards = [shard(store, i, clock) for i in range(3)]
    for s in shards:
        s.seeding = True
        assert s.frontier is not None
        for h in hosts:
            s.frontier.add(urls(h, 1))
    for i, s in enumerate(shards):
        assert set(s.owned) == {h for h in hosts if seed_home(h, 3) == i}


def test_a_pushed_block_is_taken_whole_by_the_puller_and_a_stale_copy_takes_nothing(store: SqliteStore) -> None:
    clock = Clock()
    a, b = shard(store, 0, clock), shard(store, 1, clock)
    assert a.frontier is not None and b.frontier is not None
    for name in ("h1.test", "h2.test", "h3.test"):
        a.frontier.add(urls(name, 5))
    a.frontier.lease("f1", 2, now=clock.now)  # h1 active and leased: it never moves
    published: list[Block] = []
    given = a.push(10, block_urls=10, skip=set(), below=100, publish=published.append, service="svc")
    assert given == 10 and [h.host for blk in published for h in blk.hosts] == ["h3.test", "h2.test"]
    assert a.frontier.host("h3.test") is None and "h3.test" not in a.owned
    assert b.take_block(published[0]) == 10
    assert {"h2.test", "h3.test"} <= set(b.owned) and b.frontier.pending == 10
    assert a.take_block(published[0]) == 0 and a.moves.stale_hosts == 2  # a redelivered copy
    assert b.take_block(published[0]) == 0 and b.moves.stale_hosts == 2 and b.frontier.pending == 10


def test_a_block_whose_taking_failed_halfway_is_taken_whole_when_it_comes_back(store: SqliteStore) -> None:
    """The store applies the second host's swap but its reply is lost (the call raises): the block is not
    acked and comes back, and that host, ours in the store but in no frontier, is taken then."""
    clock = Clock()
    a, b = shard(store, 0, clock), shard(store, 1, clock)
    assert a.frontier is not None and b.frontier is not None
    for name in ("h2.test", "h3.test"):
        a.frontier.add(urls(name, 5))
    published: list[Block] = []
    a.push(10, block_urls=10, skip=set(), below=100, publish=published.append, service="svc")
    block = published[0]
    real_take, calls = b.owners.take, []

    def reply_lost(host: str, gen: int, shard: int) -> object:
        calls.append(host)
        got = real_take(host, gen, shard)
        if len(calls) == 2:
            raise ConnectionError("thrift gone after the swap")
        return got

    b.owners.take = reply_lost  # type: ignore[method-assign,assignment]
    with pytest.raises(ConnectionError):
        b.take_block(block)
    b.owners.take = real_take  # type: ignore[method-assign]
    first, second = (h.host for h in block.hosts)
    assert set(b.owned) == {first} and b.frontier.pending == 5
    assert b.take_block(block) == 5  # the redelivered block: the first host is not taken twice
    assert set(b.owned) == {first, second} and b.frontier.pending == 10

def test_a_block_the_broker_refuses_leaves_its_hosts_where_they_were(store: SqliteStore) -> None:
    clock = Clock()
    a = shard(store, 0, clock)
    assert a.frontier is not None
    a.frontier.add(urls("h1.test", 3) + urls("h2.test", 4))

    def refuse(_block: Block) -> None:
        raise ConnectionError("broker away")

    assert a.push(10, block_urls=10, skip=set(), below=100, publish=refuse, service="svc") == 0
    assert {"h1.test", "h2.test"} <= set(a.owned) and a.frontier.pending == 7
    rec = a.owners.read("h2.test")
    assert rec is not None and rec.shard == 0 and a.moves.push_failures == 1


def test_a_dead_shards_hosts_and_its_orphaned_transit_records_are_taken_over(store: SqliteStore) -> None:
    clock = Clock()
    dead, peer = shard(store, 2, clock), shard(store, 0, clock)
    assert dead.frontier is not None and peer.frontier is not None
    dead.frontier.add(urls("d1.test", 2) + urls("d2.test", 3))
    rec = dead.owned["d2.test"]
    dead.owners.push(rec, pending=3, not_before=clock.now + 1, ip="10.0.0.9", issued=4)  # died before the block
    assert peer.take_over(2) == 2
    assert {"d1.test", "d2.test"} <= set(peer.owned)
    moved = peer.frontier.host("d2.test")
    assert moved is not None and moved.pending == 3 and moved.ip == "10.0.0.9" and moved.issued == 4
    got = peer.owners.read("d1.test")
    assert got is not None and got.shard == 0 and got.gen == 2


def test_a_transit_record_with_no_block_is_taken_back_by_a_reread_once_the_queue_is_empty(
    store: SqliteStore,
) -> None:
    clock = Clock()
    a, b = shard(store, 0, clock), shard(store, 1, clock)
    assert a.frontier is not None
    a.frontier.add(urls("t.test", 2))
    a.owners.push(a.owned.pop("t.test"), pending=2, not_before=0, ip="", issued=0)
    b.restoring = True
    assert not b.admit("t.test", 2)  # its block may still be on the way
    b.queue_empty = True
    assert not b.admit("t.test", 2)  # too recent
    clock.now += 5
    assert b.admit("t.test", 2) and b.moves.orphans == 1


def test_an_orphan_taken_by_the_frontiers_reread_is_one_host_with_the_stores_count_and_its_clock(
    store: SqliteStore,
) -> None:
    """The gate takes an orphan while the frontier makes the host's state: the frontier is not re-entered
    (a second state made inside the gate was overwritten and its pending URLs counted for ever: a shard's
    crawl never ended), and the clock and address the host came with reach it after the re-read."""
    clock = Clock()
    a, b = shard(store, 0, clock), shard(store, 1, clock)
    assert a.frontier is not None and b.frontier is not None
    a.frontier.add(urls("t.test", 2))
    a.owners.push(a.owned.pop("t.test"), pending=2, not_before=clock.now + 30, ip="10.0.0.7", issued=5)
    b.restoring = b.queue_empty = True
    clock.now += 5
    assert b.frontier.restore("t.test", 3)
    b.restoring = False
    b.settle_arrivals()
    hs = b.frontier.host("t.test")
    assert hs is not None and hs.pending == 3 == b.frontier.pending and len(b.frontier) == 1
    assert hs.ip == "10.0.0.7" and hs.issued == 5 and hs.next_allowed == clock.now + 25
    assert [h.host for h in b.frontier.at_work] == ["t.test"] and not b.arrived


def test_a_host_of_a_stopped_shard_is_anyones(store: SqliteStore) -> None:
    clock = Clock()
    gone, a = shard(store, 1, clock), shard(store, 0, clock)
    assert gone.frontier is not None and a.frontier is not None
    gone.frontier.add(urls("g.test", 1))
    a.frontier.add_pending("g.test", 3)
    assert a.frontier.host("g.test") is None  # shard 1 owns it and runs
    a.released = {1}  # shard 1 released its lease (it ended): its hosts are taken by who needs them
    a.forward(lambda s, h: None, live=[0])
    assert "g.test" in a.owned and a.frontier.pending == 3
