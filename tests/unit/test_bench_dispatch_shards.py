"""``crawlfleet bench dispatch --shards``: N dispatcher shards driven by the one-dispatcher harness over
in-memory fakes of the store's shared records and the remote queue (the seams), and the wall arithmetic.
No timed assertions: what ran, who owns what, and the formulas on given figures."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.harness.bench.dispatch import _shard_counts, one_core
from pipeline.harness.bench.sharddecisions import measure_shards, pooled
from pipeline.harness.bench.shardseams import MemoryMeta, MemorySide, RemoteQueue, SharedMetaStore
from pipeline.harness.bench.shardwall import MAX_NODES, Fleet, linear_at, wall, walls
from pipeline.settings import FleetSettings
from pipeline.transport.wire.shardwire import Block, BlockHost


def test_memory_meta_is_a_compare_and_set_store_with_prefix_scans() -> None:
    m = MemoryMeta()
    assert m.swap("own:s:b", None, "1") and not m.swap("own:s:b", None, "2") and m.get("own:s:b") == "1"
    assert m.swap("own:s:b", "1", "3") and m.get("own:s:b") == "3"
    m.put("own:s:a", "x")
    m.put("own:t:a", "y")
    assert m.scan("own:s:") == [("own:s:a", "x"), ("own:s:b", "3")]
    m.delete(["own:s:a", "absent"])
    assert m.scan("own:") == [("own:s:b", "3"), ("own:t:a", "y")]


def test_a_shards_store_shares_only_the_coordination_records(tmp_path: Path) -> None:
    meta = MemoryMeta()
    a, b = SharedMetaStore(tmp_path / "a.db", meta), SharedMetaStore(tmp_path / "b.db", meta)
    try:
        assert a.swap_meta("own:svc:h.test", None, '{"s":0}')
        assert b.get_meta("own:svc:h.test") == '{"s":0}' and not b.swap_meta("own:svc:h.test", None, "{}")
        a.put_meta("seeds", "mine")  # not shared: the shard's own SQLite
        assert b.get_meta("seeds") is None and a.get_meta("seeds") == "mine"
        assert (a.ops.swap, a.ops.get, b.ops.get, b.ops.swap) == (1, 0, 1, 1)
    finally:
        a.close()
        b.close()


def test_the_remote_queue_carries_blocks() -> None:
    q = RemoteQueue()
    a, b = MemorySide(FleetSettings(), "svc", q), MemorySide(FleetSettings(), "svc", q)
    block = Block("svc", 0, (BlockHost("h.test", 2, 16),))
    a.push_block(block)
    assert b.queued_blocks() == 1 and a.bytes_pushed > 0
    got: list[Block] = []
    assert b.pull_block(got.append) and not b.pull_block(got.append)
    assert got == [block] and q.messages == []


def test_shards_drive_their_own_slots_and_hosts_and_move_blocks(tmp_path: Path) -> None:
    got = measure_shards(2, 2, seconds=0.05, slots=4, out=tmp_path, block_urls=64)
    assert [f["shard"] for f in got["shards"]] == [0, 1]
    for f in got["shards"]:
        assert f["shard_slots_per_node"] == 2 and f["batches_issued"] > 0
        assert f["store_ops_per_page"] > 0 and f["gate_us_per_host"] == f["gate_us_per_host"]
        issued = [json.loads(x) for x in (tmp_path / f"shard-{f['shard']}" / "fleet-events.jsonl").read_text().splitlines()]
        slots = {int(e["vfid"].rpartition("#")[2]) for e in issued if e["ev"] == "issue"}
        assert slots and all(s % 2 == f["shard"] for s in slots)  # every other slot of each node
    m = got["moves"]
    assert m["pushed_urls"] > 0 and m["pulled_urls"] > 0 and m["pushed_blocks"] >= 1
    assert m["push_us_per_url"] is not None and m["quiet_beat_us"] is not None
    pooled_ = pooled([got])
    assert {"decision_us", "gate_us_per_host", "push_us_per_url", "look_us"} <= set(pooled_)


def test_linear_at_interpolates_and_extends_along_the_last_two_sizes() -> None:
    med = {2: {"x": 10.0}, 100: {"x": 108.0}, 1000: {"x": 1008.0}}
    assert linear_at(med, "x", 51) == pytest.approx(59.0)
    assert linear_at(med, "x", 2000) == pytest.approx(2008.0)
    assert linear_at({5: {"x": 3.0}}, "x", 900) == 3.0


def _fleet(**kw: float) -> Fleet:
    base = dict(node_pages_per_s=100.0, batch_pages=10.0, fleet_s_per_page=0.0, fleet_s_per_s=0.0, heartbeat_s=2.0,
                tick_s=0.5, shard_heartbeat_s=2.0, new_hosts_per_page=0.0, moved_share=0.0)
    return Fleet(**(base | kw))


def _med(decision_us: float, **extra: float) -> dict[int, dict[str, float]]:
    return {n: {"decision_us": decision_us, "heartbeat_us": 0.0, "tick_us": 0.0, **extra} for n in (2, 100, 1000)}


def test_the_decision_wall_grows_with_the_shards_less_what_they_add() -> None:
    # one dispatcher: n*100/10 decisions/s of 100 us = n*1e-3 s/s: 1,000 nodes
    got = walls(_med(100.0), {2: _med(100.0), 3: _med(100.0, gate_us_per_host=10.0)}, _fleet(new_hosts_per_page=0.5))
    assert got["shards_1"]["decision_wall_nodes"] == 1000
    assert got["shards_2"]["decision_wall_nodes"] == 2000 and got["shards_2"]["decision_wall_over_one_dispatcher"] == 2.0
    # three shards whose gate adds 0.5 x 10 us per page: n/3*100*(10 + 5) us <= 1 s
    assert 1999 <= got["shards_3"]["decision_wall_nodes"] <= 2000 and got["shards_3"]["shard_us_per_page"] == 5.0


def test_the_wall_is_the_last_node_count_within_one_core() -> None:
    assert wall(lambda n: n / 1234) == 1234 and wall(lambda n: 5.0) == 2 and wall(lambda n: 0.0) == MAX_NODES


def test_one_shards_core_wall_is_one_cores() -> None:
    args = argparse.Namespace(node_pages_per_s=100.0, fleet_ms_per_page=0.1, fleet_ms_per_s=0.0, batch_pages=10.0)
    grow = {n: {"decision_us": 50.0 + (n - 2), "heartbeat_us": 1.0, "tick_us": 0.0} for n in (2, 100, 1000)}
    expected = one_core({f"nodes_{n}": {"median": m} for n, m in grow.items()}, args)["nodes"]
    got = walls(grow, {}, _fleet(fleet_s_per_page=1e-4))
    assert got["shards_1"]["one_core_nodes"] == expected


@pytest.mark.parametrize("bad", ["0", "x", "1,,y", "65", ""])
def test_a_bad_shards_value_is_one_line_and_exit_2(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "dispatch", "--shards", bad])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--shards" in err and "Traceback" not in err


def test_shard_counts_parse_as_a_sorted_list() -> None:
    assert _shard_counts("3,1, 2,2") == [1, 2, 3]


@pytest.mark.parametrize("bad", [["--host-delay", "-0.5"], ["--per-host", "0"], ["--parts", "skew,nope"]])
def test_a_bad_shards_bench_option_is_one_line_and_exit_2(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``crawlfleet bench shards``: a bad option is refused before any broker, store or process is touched."""
    assert main(["bench", "shards", *bad]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and bad[0] in err and "Traceback" not in err
