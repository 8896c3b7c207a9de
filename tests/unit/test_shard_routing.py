"""Where the link jobs' report goes with dispatcher shards (pipeline/transport/links/routing.py), on a real
SQLite store: to each host's owner, new hosts claimed "at home" (the owner of the page that linked to them),
hosts in transit counted on their transit record, segments to the live shard that wrote them."""

from __future__ import annotations

from pathlib import Path

from pipeline.storage.hostowners import HostOwners
from pipeline.storage.leases import Leases
from pipeline.storage.shardleases import shard_lease
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.dispatcher.nodes import shard_slots
from pipeline.transport.dispatcher.shardhosts import seed_home
from pipeline.transport.links.routing import ShardRouter
from pipeline.transport.wire.replies import LinksReport
from pipeline.transport.wire.shardwire import Block, BlockHost, shard_of_segment, wire_name
from tests.unit.test_core import Clock


def test_a_report_is_split_by_owner_and_new_hosts_go_home(tmp_path: Path) -> None:
    clock = Clock()
    with SqliteStore(tmp_path / "c.db") as store:
        for s in (0, 1, 2):  # three live shards
            assert Leases(store, owner=f"p{s}", ttl_s=30, skew_s=1, clock=clock).acquire(shard_lease("svc", s))
        owners = HostOwners(store, "svc", clock=clock)
        owners.claim("a.test", 1)
        mine, _ = owners.claim("b.test", 2)
        assert mine is not None
        assert owners.push(mine, pending=3, not_before=0, ip="", issued=0) is not None  # b.test in transit
        owners.claim("hub.test", 0)
        router = ShardRouter(store, "svc", 3, skew_s=1, clock=clock)
        report = LinksReport(
            ("n1/svc-shard2-000000007-1-0000.jsonl", "n1/svc-shard1-000000003-1-0000.jsonl", "n2/other-1.jsonl"),
            {"a.test": 4, "b.test": 2, "new.test": 5},
            found_by={"new.test": "hub.test", "a.test": "hub.test"},
        )
        parts = router.route(report)
        assert parts[1] == LinksReport(("n1/svc-shard1-000000003-1-0000.jsonl",), {"a.test": 4})
        assert parts[0] == LinksReport((), {"new.test": 5})  # found by hub.test's pages: shard 0's home
        assert parts[2] == LinksReport(("n1/svc-shard2-000000007-1-0000.jsonl",), {})
        moving = owners.read("b.test")
        assert moving is not None and moving.in_transit and moving.pending == 5  # its block takes them too
        got = owners.read("new.test")
        assert got is not None and got.shard == 0 and router.claimed == 1


def test_segments_of_a_shard_that_is_not_live_are_left_out(tmp_path: Path) -> None:
    clock = Clock()
    with SqliteStore(tmp_path / "c.db") as store:
        assert Leases(store, owner="p0", ttl_s=30, skew_s=1, clock=clock).acquire(shard_lease("svc", 0))
        router = ShardRouter(store, "svc", 2, skew_s=1, clock=clock)
        parts = router.route(LinksReport(("n/svc-shard1-000000001-1-0000.jsonl",), {"x.test": 1}))
        assert parts == {0: LinksReport((), {"x.test": 1})}  # the only live shard claims the new host


def test_names_slots_seeds_and_blocks() -> None:
    assert wire_name("svc", 0, 1) == "svc" and wire_name("svc", 2, 3) == "svc-shard2"
    assert shard_of_segment("node-1/svc-shard2-000000005-17-0000.jsonl", "svc", 3) == 2
    assert shard_of_segment("node-1/svc-shard9-000000005-17-0000.jsonl", "svc", 3) is None
    assert shard_of_segment("node-1/svcx-shard1-000000005-17-0000.jsonl", "svc", 3) is None
    # The shards share each node's slots, never more batches than slots.
    parts = [shard_slots(8, shards=3, shard=s) for s in range(3)]
    assert sorted(i for p in parts for i in p) == list(range(8))
    assert shard_slots(2, shards=3, shard=2) == [0]
    homes = {seed_home(f"site{i}.test", 3) for i in range(30)}
    assert homes == {0, 1, 2}
    block = Block("svc", 1, (BlockHost("a.test", 4, 10), BlockHost("b.test", 2, 3)))
    again = Block.decode(block.encode(), max_bytes=1 << 20)
    assert again == block and again.urls == 13
    for bad in (b"not zlib", block.encode()[:-3]):
        try:
            Block.decode(bad, max_bytes=1 << 20)
        except ValueError as exc:
            assert "not a block of hosts" in str(exc)
        else:
            raise AssertionError("a bad block was accepted")
