"""S1's per-minute budget divided among the dispatcher shards alive (pipeline/dispatch/quotashares.py), on a
fake clock: three shards, each S1's admission on its part, grant as much as they may every 0.1 s; the plans
of the minutes are kept first-decision-wins as the store keeps them. A dead shard's part moves to the live
ones from the next minute, a slow shard keeps its part, a shard coming back waits for the next minute,
and at no instant do the grants of a minute pass floor(s * m)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from pipeline.dispatch.admission import Admission, minute_of, second_of_minute
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.quotashares import MinuteShares, PlanError, SharePlan, plan_members

M = 6.0  # the service's URLs per second
TTL, SKEW = 1.5, 0.125  # shard leases at a heartbeat of 1 s (pipeline/storage/shardleases.py)
T0 = 1_800_000_000.0 - (1_800_000_000 % 60)  # the start of a minute
STEP = 0.1


@dataclass
class Shard:
    index: int
    shares: MinuteShares
    admission: Admission
    running: bool = True  # its process lives (its lease keeper renews)
    acting: bool = True  # its dispatch loop runs (a slow shard's does not, for a while)
    granted: list[tuple[float, int]] = field(default_factory=list)


class Sim:
    def __init__(self, shards: int = 3) -> None:
        self.now = T0 + 0.05
        self.plans: dict[int, SharePlan] = {}  # the store's plans: the first decision of a minute stays
        self.deadlines: dict[int, float] = {}  # lease deadlines (0 = released: taken over or stopped)
        self.shards = [self.shard(i) for i in range(shards)]

    def shard(self, i: int) -> Shard:
        shares = MinuteShares(i)
        return Shard(i, shares, Admission(Quotas({"svc": M}), share=shares.fraction))

    def plan(self, s: Shard) -> None:
        minute = minute_of(self.now)
        if not s.shares.knows(minute):
            if minute not in self.plans:
                members = plan_members(self.deadlines, len(self.shards), decider=s.index, now=self.now, skew_s=SKEW)
                self.plans[minute] = SharePlan(minute, members)
            s.shares.learn(self.plans[minute])

    def step(self) -> None:
        for s in self.shards:
            if s.running:
                self.deadlines[s.index] = self.now + TTL
        for i, until in list(self.deadlines.items()):  # a peer takes a dead shard over: its lease released
            if until > 0 and until + SKEW <= self.now:
                self.deadlines[i] = 0.0
        for s in self.shards:
            if not (s.running and s.acting):
                continue
            self.plan(s)
            budget = s.admission.budget("svc", self.now)
            t = s.admission.admitted(s.admission.request("svc", 10), budget or 0)
            if t:
                s.admission.grant("svc", f"f{s.index}", t, self.now)
                s.granted.append((self.now, t))
        self.check()
        self.now += STEP

    def run_to(self, t: float) -> None:
        while self.now < t:
            self.step()

    def check(self) -> None:
        """The grants of this minute so far never pass floor(s * m), S1's bound for the service."""
        start = minute_of(self.now) * 60
        so_far = sum(n for s in self.shards for at, n in s.granted if start <= at <= self.now)
        assert so_far <= math.floor(second_of_minute(self.now) * M + 1e-9), (self.now - T0, so_far)

    def in_minute(self, k: int, shard: int | None = None) -> int:
        start = T0 + 60 * k
        return sum(n for s in self.shards for at, n in s.granted
                   if start <= at < start + 60 and (shard is None or s.index == shard))  # fmt: skip

    def members(self, k: int) -> tuple[int, ...]:
        """The members of the plan of the k-th minute from T0."""
        return self.plans[minute_of(T0) + k].members

    def kill(self, i: int) -> None:
        self.shards[i].running = False

    def restart(self, i: int) -> None:
        self.shards[i] = self.shard(i)


def test_a_dead_shards_part_moves_to_the_live_ones_from_the_next_minute() -> None:
    sim = Sim()
    sim.run_to(T0 + 90)  # dies at second 30 of minute 1
    assert sim.in_minute(0) == 360 and {sim.in_minute(0, i) for i in range(3)} == {120}
    sim.kill(2)
    sim.run_to(T0 + 180)
    assert sim.members(1) == (0, 1, 2)  # the minute it died in: its part idles (its grants count)
    assert sim.in_minute(1) < 360
    assert sim.members(2) == (0, 1)  # the next minute: the whole budget, half each
    assert sim.in_minute(2) == 360 and sim.in_minute(2, 0) == sim.in_minute(2, 1) == 180


def test_a_shard_dead_at_a_minutes_end_still_shares_the_next_and_not_the_one_after() -> None:
    """The plan of a minute is decided at its start: a lease still running then keeps the shard in it."""
    sim = Sim()
    sim.run_to(T0 + 59.95)
    sim.kill(1)
    sim.run_to(T0 + 180)
    assert sim.members(1) == (0, 1, 2) and sim.in_minute(1) == 240
    assert sim.members(2) == (0, 2) and sim.in_minute(2) == 360


def test_a_slow_shard_keeps_its_part_and_spends_it_late_within_the_budget() -> None:
    """Its dispatch loop stalls for 40 s across a minute's turn while its lease is renewed: it stays in the
    plan, its part waits for it (S1's unused seconds carry over within the minute), nobody else takes it."""
    sim = Sim()
    sim.run_to(T0 + 50)
    sim.shards[1].acting = False
    sim.run_to(T0 + 90)
    sim.shards[1].acting = True
    sim.run_to(T0 + 120)
    assert sim.members(1) == (0, 1, 2)
    assert sim.in_minute(1, 0) == sim.in_minute(1, 2) == 120 and sim.in_minute(1, 1) == 120
    late = [n for at, n in sim.shards[1].granted if T0 + 90 <= at < T0 + 100]
    assert sum(late) >= 60  # the seconds it missed, caught up at its return (a steady 10 s would be 20)


def test_a_shard_paused_past_its_lease_grants_nothing_in_a_minute_shared_without_it() -> None:
    """Its lease ran out and was taken over while it was paused (fenced); at its return its part of the
    minute is the plan's: none (the live shards were given it), so the sum still holds."""
    sim = Sim()
    sim.run_to(T0 + 55)
    sim.kill(2)
    sim.shards[2].acting = False
    sim.run_to(T0 + 75)
    sim.shards[2].running = sim.shards[2].acting = True  # back (as if its lease were still its own)
    sim.run_to(T0 + 120)
    assert sim.members(1) == (0, 1)
    assert sim.in_minute(1, 2) == 0 and sim.in_minute(1) == 360


def test_a_shard_that_comes_back_waits_for_the_next_minute_and_the_parts_shrink_again() -> None:
    sim = Sim()
    sim.run_to(T0 + 30)
    sim.kill(2)
    sim.run_to(T0 + 90)
    sim.restart(2)  # a new process for shard 2 at second 30 of minute 1
    sim.run_to(T0 + 180)
    assert sim.members(1) == (0, 1) and sim.in_minute(1, 2) == 0 and sim.in_minute(1) == 360
    assert sim.members(2) == (0, 1, 2) and {sim.in_minute(2, i) for i in range(3)} == {120}


@pytest.mark.parametrize("m", [6.0, 7.0, 0.5, 12.5])
def test_the_parts_of_a_plan_never_add_up_to_more_than_the_budget(m: float) -> None:
    """Every member's floor(s * m / k) at every second adds up to at most floor(s * m)."""
    for k in range(1, 8):
        plan = SharePlan(0, tuple(range(k)))
        for s in range(1, 61):
            parts = [math.floor(s * m * plan.fraction(i) + 1e-9) for i in range(k + 2)]
            assert sum(parts) <= math.floor(s * m + 1e-9), (m, k, s)


def test_members_are_the_shards_with_a_running_lease_or_none_yet() -> None:
    deadlines = {0: 110.0, 1: 99.0, 2: 0.0, 3: 100.05}  # 1 ran out, 2 released, 3 within the skew
    assert plan_members(deadlines, 5, decider=0, now=100.0, skew_s=0.125) == (0, 3, 4)  # 4 never started
    assert plan_members({}, 2, decider=1, now=0.0, skew_s=0.1) == (0, 1)
    assert plan_members({0: 0.0, 1: 0.0}, 2, decider=1, now=5.0, skew_s=0.1) == (1,)  # the decider lives


def test_a_minute_whose_plan_is_unknown_grants_nothing_and_asks_again_next_second() -> None:
    shares = MinuteShares(0)
    a = Admission(Quotas({"svc": M}), share=shares.fraction)
    now = T0 + 5.3
    assert a.budget("svc", now) == 0 and a.wait_s("svc", now) == pytest.approx(0.7)
    shares.learn(SharePlan(minute_of(now), (0, 1)))
    assert a.budget("svc", now) == math.floor(6 * M / 2)


def test_plans_encode_decode_and_the_first_learnt_stays() -> None:
    plan = SharePlan(7, (0, 2))
    assert SharePlan.decode(plan.encode()) == plan and plan.fraction(1) == 0.0 and plan.fraction(2) == 0.5
    with pytest.raises(PlanError):
        SharePlan.decode('{"minute": 7}')
    with pytest.raises(PlanError):
        SharePlan(7, ())
    shares = MinuteShares(1)
    shares.learn(SharePlan(7, (0, 1)))
    shares.learn(SharePlan(7, (1,)))
    assert shares.fraction(7) == 0.5
    for minute in (8, 9, 10):
        shares.learn(SharePlan(minute, (1,)))
    assert sorted(shares.plans) == [8, 9, 10] and shares.fraction(7) is None
