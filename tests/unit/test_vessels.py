"""S5's communicating-vessels rule (pipeline/dispatch/vessels.py): what a shard pushes or pulls at a heartbeat."""

from __future__ import annotations

from pipeline.dispatch.vessels import Levels, Move, decide, volume


def test_a_shard_at_the_mean_moves_nothing() -> None:
    levels = {0: 1000.0, 1: 1000.0, 2: 1000.0}
    for s in levels:
        assert decide(s, levels, ready_now=1000, queued_blocks=0, block=512) == Move()


def test_the_surplus_over_the_mean_is_pushed_and_the_shortfall_pulled_in_blocks() -> None:
    levels = {0: 3000.0, 1: 0.0, 2: 0.0}
    assert volume(0, levels, block=512) == 2000.0
    assert decide(0, levels, ready_now=3000, queued_blocks=0, block=512) == Move(push=2000)
    # Once shard 0 has pushed (its level 1000, four blocks wait), each of the others is about 1000 short of
    # the common level ((1000 + 0 + 0 + 4 x 512) / 3): about two blocks each, as long as blocks wait.
    after = {0: 1000.0, 1: 0.0, 2: 0.0}
    assert decide(1, after, ready_now=0, queued_blocks=4, block=512) == Move(pull=2)
    assert decide(2, after, ready_now=0, queued_blocks=1, block=512) == Move(pull=1)
    # Blocks that wait count as work still to share: with 12 blocks queued the common level is
    # (3000 + 6144) / 3 = 3048, and shard 0 (3000) is at it: it pushes nothing.
    assert decide(0, levels, ready_now=3000, queued_blocks=12, block=512) == Move()


def test_what_is_pushed_equals_what_is_asked_for() -> None:
    levels = {0: 5200.0, 1: 900.0, 2: 400.0, 3: 3500.0}
    vols = [volume(s, levels, block=100) for s in levels]
    assert abs(sum(vols)) < 1e-9  # deviations from the mean cancel: the vessels hold the water they had


def test_a_difference_under_half_a_block_moves_nothing() -> None:
    levels = {0: 1200.0, 1: 1000.0}
    assert volume(0, levels, block=512) == 0.0  # 100 over the mean, a block is 512
    assert decide(0, levels, ready_now=1200, queued_blocks=0, block=512) == Move()
    assert decide(1, levels, ready_now=1000, queued_blocks=0, block=512) == Move()


def test_a_shard_alone_or_unknown_moves_nothing() -> None:
    assert volume(0, {0: 9000.0}, block=10) == 0.0
    assert volume(3, {0: 9000.0, 1: 0.0}, block=10) == 0.0


def test_a_shard_with_nothing_ready_takes_a_waiting_block_whatever_the_mean() -> None:
    # Everyone is empty (the mean is 0), but a block waits: it is work nobody is doing.
    assert decide(1, {0: 0.0, 1: 0.0}, ready_now=0, queued_blocks=2, block=512) == Move(pull=1)
    # The rule off (the measured baseline): still pulls what waits, never pushes.
    assert decide(1, {0: 0.0, 1: 0.0}, ready_now=0, queued_blocks=2, block=512, balance=False) == Move(pull=1)
    assert decide(0, {0: 9000.0, 1: 0.0}, ready_now=9000, queued_blocks=0, block=512, balance=False) == Move()


def test_a_push_never_exceeds_what_is_ready_now() -> None:
    # The smoothed level remembers 4000, but only 600 URLs are ready this instant.
    assert decide(0, {0: 4000.0, 1: 0.0}, ready_now=600, queued_blocks=0, block=100) == Move(push=600)


def test_levels_are_smoothed_over_the_window_and_moves_apply_at_once() -> None:
    lv = Levels(window=3)
    for level in (300, 600, 900, 1200):
        lv.add(0, level)
    lv.add(1, 0)
    assert lv.smoothed() == {0: 900.0, 1: 0.0}  # the last three of shard 0
    lv.moved(0, 600)  # pushed 600: every remembered sample of it drops by as much (not below 0)
    assert lv.smoothed()[0] == 300.0
    lv.moved(1, -250)  # pulled 250
    assert lv.smoothed()[1] == 250.0
    lv.keep_only([1])
    assert lv.smoothed() == {1: 250.0}


def _simulate(found: dict[int, int], start: dict[int, int], *, beats: int, block: int, balance: bool,
              eat: int = 350) -> tuple[list[int], int, int]:
    """Shards at heartbeat frequency: each finds ``found[s]`` and consumes ``eat`` URLs a beat, then runs the
    rule; blocks go through a FIFO remote queue. Returns the spread (max - min ready) after each beat, the
    URLs moved and the transfers (blocks pushed plus pulled)."""
    ready = dict(start)
    queue: list[int] = []
    lv = Levels(window=3)
    spreads: list[int] = []
    moved = transfers = 0
    for _ in range(beats):
        for s in ready:
            ready[s] = max(0, ready[s] + found[s] - eat)
            lv.add(s, ready[s])
        for s in ready:  # in turn, each seeing what those before it moved (as each publishes after its move)
            mv = decide(s, lv.smoothed(), ready_now=ready[s], queued_blocks=len(queue), block=block, balance=balance)
            left = mv.push
            while left > 0:
                queue.append(min(block, left))
                left -= queue[-1]
                transfers += 1
            ready[s] -= mv.push
            lv.moved(s, mv.push)
            moved += mv.push
            for _ in range(mv.pull):
                if queue:
                    got = queue.pop(0)
                    ready[s] += got
                    lv.moved(s, -got)
                    transfers += 1
        spreads.append(max(ready.values()) - min(ready.values()))
    return spreads, moved, transfers


def test_a_skewed_discovery_stays_balanced_with_few_transfers() -> None:
    """Shard 0 finds 80% of the new work (800 of 1,000 URLs a beat); each shard consumes 350 a beat.
    Without the rule shard 0 drowns while the others starve; with it the spread stays a few blocks (the
    window's lag behind a level that grows every beat), and what moves is about shard 0's surplus."""
    found, start = {0: 800, 1: 100, 2: 100}, {0: 0, 1: 0, 2: 0}
    with_rule, moved, transfers = _simulate(found, start, beats=60, block=200, balance=True)
    without, _, _ = _simulate(found, start, beats=60, block=200, balance=False)
    assert without[-1] > 40 * 200  # 450 more a beat at shard 0, for 60 beats
    assert max(with_rule[10:]) <= 6 * 200
    assert moved <= 1.2 * (800 - 350) * 60  # the surplus, not more
    assert transfers <= 6 * 60


def test_a_backlog_at_one_shard_is_shared_out_and_then_nothing_moves() -> None:
    """All the work starts at shard 0 (a skewed web's first hosts), nothing new is found: at the first beat
    the three hold the same to within a block, and once level nothing moves any more."""
    spreads, moved, _ = _simulate({0: 0, 1: 0, 2: 0}, {0: 12_000, 1: 0, 2: 0}, beats=12, block=500, balance=True,
                                  eat=100)  # fmt: skip
    assert max(spreads) <= 500  # one beat: shard 0 pushes two thirds, the others pull a third each
    assert moved <= 8_000 + 2 * 500  # two thirds of the backlog (plus a block of rounding)
    _, later, _ = _simulate({0: 0, 1: 0, 2: 0}, {0: 3_000, 1: 3_000, 2: 3_000}, beats=10, block=500, balance=True,
                            eat=100)  # fmt: skip
    assert later == 0


def test_idle_shards_share_the_blocks_a_push_left_in_the_remote_queue() -> None:
    # Shard 1 pushed 20 blocks of 10, but the window still remembers its level from before (300): the
    # common level is (300 + 200) / 3 = 167, 17 blocks short for either idle shard. Each takes its half.
    levels = {0: 0.0, 1: 300.0, 2: 0.0}
    assert decide(2, levels, ready_now=0, queued_blocks=20, block=10) == Move(pull=10)
    # Shards further under the common level (167) take more: 167 and 67 short, 8 blocks of 10 and 3.
    lv = {0: 0.0, 1: 300.0, 2: 100.0}
    assert [decide(s, lv, ready_now=int(lv[s]), queued_blocks=10, block=10).pull for s in (0, 2)] == [8, 3]


def test_a_halted_shard_moves_nothing() -> None:
    """A re-crawl's stop file: the shard issues nothing more, so it neither pushes its surplus nor pulls the
    waiting blocks (they stay for the shards' --resume, and do not keep the stopping shards waiting)."""
    levels = {0: 3000.0, 1: 0.0}
    assert decide(0, levels, ready_now=3000, queued_blocks=0, block=512, halted=True) == Move()
    assert decide(1, levels, ready_now=0, queued_blocks=3, block=512, halted=True) == Move()
    assert decide(1, levels, ready_now=0, queued_blocks=3, block=512) != Move()
