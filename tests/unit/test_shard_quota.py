"""A dispatcher shard's part of S1's budget from the plans in the store (pipeline/transport/dispatcher/shardquota.py),
over a real SQLite store with shard lease records and a fake clock: the first shard to reach a minute decides
its plan and the others read the same one; a shard whose lease was taken over leaves the next minute's plan;
old plans are deleted; a store that fails leaves the minute unknown (no grant) until a later tick."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.dispatch.admission import minute_of
from pipeline.storage.leases import PREFIX, Lease
from pipeline.storage.shardleases import shard_lease
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.dispatcher.shardquota import KEEP, ShardQuota, plan_key
from tests.unit.test_core import Clock


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with SqliteStore(tmp_path / "c.db") as s:
        yield s


def lease(store: SqliteStore, shard: int, until: float) -> None:
    name = shard_lease("svc", shard)
    store.put_meta(PREFIX + name, Lease(name, f"p{shard}", 1, until, f"t{shard}").encode())


def quota(store: SqliteStore, index: int, clock: Clock) -> ShardQuota:
    return ShardQuota(store, "svc", 3, index, clock=clock, wall=clock, skew_s=0.125)


def test_the_first_shard_decides_and_the_others_read_the_same_plan(store: SqliteStore) -> None:
    clock = Clock()
    for i in range(3):
        lease(store, i, clock.now + 1.5)
    shards = [quota(store, i, clock) for i in range(3)]
    minute = minute_of(clock.now)
    assert all(q.fraction(minute) is None for q in shards)  # nothing granted before the plan is known
    plans = [q.tick() for q in shards]
    assert all(p is not None and p.members == (0, 1, 2) for p in plans)
    assert [q.decided for q in shards] == [1, 0, 0] and {q.fraction(minute) for q in shards} == {1 / 3}

    # Shard 2 dies and is taken over (its lease released): it leaves the next minute's plan, not this one's.
    lease(store, 2, 0.0)
    clock.now += 10
    assert shards[0].tick() is plans[0] and shards[0].fraction(minute) == pytest.approx(1 / 3)
    clock.now = (minute + 1) * 60 + 0.2
    for i in (0, 1):  # their keepers renew
        lease(store, i, clock.now + 1.5)
    nxt = shards[1].tick()
    assert nxt is not None and nxt.members == (0, 1) and shards[1].decided == 1 and shards[1].changes == 1
    assert shards[0].tick() == nxt and shards[0].fraction(minute + 1) == 0.5
    assert shards[0].summary() == {"quota_members": [0, 1], "quota_part": 0.5, "quota_plans_decided": 1,
                                   "quota_changes": 1}  # fmt: skip


def test_plans_older_than_keep_minutes_are_deleted(store: SqliteStore) -> None:
    clock = Clock()
    q = quota(store, 0, clock)
    first = minute_of(clock.now)
    for k in range(KEEP + 2):
        clock.now = (first + k) * 60 + 1
        assert q.tick() is not None
    left = sorted(int(key.rsplit(":", 1)[1]) for key, _ in store.scan_meta("quotaplan:svc:"))
    assert left == list(range(first + 2, first + KEEP + 2))


class Failing(SqliteStore):
    fail = True

    def get_meta(self, key: str) -> str | None:
        if self.fail and key.startswith("quotaplan:"):
            raise ConnectionError("store away")
        return super().get_meta(key)


def test_a_store_that_fails_leaves_the_minute_unknown_until_a_later_tick(tmp_path: Path) -> None:
    clock = Clock()
    store = Failing(tmp_path / "f.db")
    with store:
        q = quota(store, 1, clock)
        assert q.tick() is None and q.fraction(minute_of(clock.now)) is None
        store.fail = False
        store.put_meta(plan_key("svc", minute_of(clock.now)), "not json")
        assert q.tick() is None  # a plan that does not decode: still no part
        store.delete_meta([plan_key("svc", minute_of(clock.now))])
        assert q.tick() is not None and q.fraction(minute_of(clock.now)) == pytest.approx(1 / 3)
