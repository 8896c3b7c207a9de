"""A dispatcher shard restarted with ``--resume``: its lease (``ShardLease.join(resume=True)``, over a real SQLite
store) waits out a crashed predecessor's lease that nobody renews, but still refuses a live process's; and its
recovery (``recovery.holds_ours``) waits only for the batches of its own, not for the ones its peers keep the
shared nodes busy with."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pipeline.storage.shardleases import ShardLease, ShardTaken
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.dispatcher.recovery import holds_ours
from pipeline.transport.wire.messages import NodeHeartbeat

HB = 0.4  # ttl 0.6 s, skew 0.05 s: the waits below are real, and short


def lease(path: Path, owner: str, hb: float = HB) -> ShardLease:
    return ShardLease(SqliteStore(path), lambda: SqliteStore(path), "svc", 2, heartbeat_s=hb, owner=owner)


def crash(shard: ShardLease) -> None:
    """Join, then stop renewing as a SIGKILL would: nobody renews the lease any more, nobody releases it."""
    shard.join()
    assert shard._keeper is not None
    shard._keeper.__exit__(None, None, None)
    shard._keeper = None


def test_a_resumed_shard_waits_out_its_crashed_predecessors_lease(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    crash(lease(path, "crashed"))
    with pytest.raises(ShardTaken):  # without --resume: refused while the lease runs
        lease(path, "plain").join()
    started = time.monotonic()
    resumed = lease(path, "resumed")
    got = resumed.join(resume=True)
    assert got.gen == 2 and got.owner == "resumed" and resumed.holds()
    assert time.monotonic() - started < 5  # bounded by the lease: past it, join refuses instead
    resumed.leave(done=True)


def test_a_resumed_shard_still_refuses_a_live_process(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    live = lease(path, "live", hb=1.0)
    live.join()  # its keeper renews every ttl / 3 (0.5 s)
    try:
        with pytest.raises(ShardTaken) as refused:
            lease(path, "second", hb=1.0).join(resume=True)
        assert "already running" in str(refused.value) and "live" in str(refused.value)
        assert live.holds()
    finally:
        live.leave(done=True)


def test_peers_leave_a_shard_to_the_process_resuming_it(tmp_path: Path) -> None:
    """While a resumer waits out its crashed predecessor's lease, a peer does not list the shard as dead (its
    takeover would race the resumer at the deadline); once the resumer holds the lease, or its claim is older
    than a lease period (the resumer died waiting), the peers see the shard as before."""
    path = tmp_path / "c.db"
    crash(lease(path, "crashed"))
    peer = ShardLease(SqliteStore(path), lambda: SqliteStore(path), "svc", 0, heartbeat_s=HB, owner="peer")
    seen: list[list[int]] = []
    resumed = lease(path, "resumed")
    real_sleep = time.sleep

    def look(s: float) -> None:  # the peer looks just before each of the resumer's polls
        real_sleep(s)
        seen.append([d.shard for d in peer.dead_peers(3)])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(time, "sleep", look)
        resumed.join(resume=True)
    assert seen and all(s == [] for s in seen), seen  # past the deadline too: the claim held the peer off
    assert peer.dead_peers(3) == []  # the resumer holds the lease now, and its claim is gone
    assert SqliteStore(path).get_meta("resume:shard:svc:2") is None
    # A resumer that died waiting: its claim holds the peers off for a lease period, then ages out.
    resumed.leave(done=False)
    SqliteStore(path).put_meta("resume:shard:svc:2", f"{time.time():.3f} gone")
    assert peer.dead_peers(3) == []
    real_sleep(1.5 * HB + HB / 8 + 0.1)
    assert [d.shard for d in peer.dead_peers(3)] == [2]


def test_two_peers_that_both_saw_a_shard_dead_take_it_over_once(tmp_path: Path) -> None:
    """Both peers read the dead shard's lease; the first takes it over and releases it marked ``taken`` (free
    again by its deadline of 0) before the second acts on its read: the second must not take it over again
    (CI saw two ``shard_takeover`` events, the second moving no host)."""
    path = tmp_path / "c.db"
    crash(lease(path, "crashed"))
    time.sleep(1.5 * HB + HB / 8 + 0.1)  # past its deadline and the skew
    first, second = (ShardLease(SqliteStore(path), lambda: SqliteStore(path), "svc", i, heartbeat_s=HB, owner=f"p{i}")
                     for i in (0, 1))  # fmt: skip
    dead_a, dead_b = first.dead_peers(3), second.dead_peers(3)
    assert [d.shard for d in dead_a] == [d.shard for d in dead_b] == [2]
    took = first.take_over(dead_a[0])
    assert took is not None
    first.taken(took)
    assert second.take_over(dead_b[0]) is None
    assert first.dead_peers(3) == second.dead_peers(3) == []


def hb(held: list[tuple[str, int, str]], *, active: int | None = None) -> NodeHeartbeat:
    return NodeHeartbeat(node="n1", incarnation="i", sent_at=0.0, successes=0, failures=0, rate=1.0, free_slots=0,
                         slots=4, active=len(held) if active is None else active, held=held)  # fmt: skip


def test_recovery_waits_for_the_shards_own_batches_only() -> None:
    peers = hb([("svc-shard0", 7, "n1#0"), ("svc-shard1", 8, "n1#1")])
    ours = hb([("svc-shard0", 7, "n1#0"), ("svc-shard2", 9, "n1#2")])
    assert not holds_ours(peers, "svc-shard2", shared=True)
    assert holds_ours(ours, "svc-shard2", shared=True)
    # One dispatcher: any batch the node runs is its own (an old node may not list them).
    assert holds_ours(hb([], active=1), "svc", shared=False)
    assert not holds_ours(hb([], active=0), "svc", shared=False)
