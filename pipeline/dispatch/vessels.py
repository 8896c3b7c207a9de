"""S5's communicating-vessels rule: how much work a dispatcher shard moves through the remote queue. Pure.

S5 (shared/MISSION.md) balances peer crawlers by a gradient rule run at a fixed heartbeat frequency: each
node compares its load with the others' and moves the difference, surplus taken from its local queue's
tail to a remote queue in large blocks, shortfall pulled back from it in blocks; the loads are smoothed
over a fixed-length window, whose length sets how sensitive the balancing is.

Here a shard's *level* is its ready work, the URLs its frontier holds pending (not leased), each shard's
level is smoothed over the last ``window`` heartbeats (``Levels``), and at each heartbeat a shard's
transport volume is its level minus the common level (``volume``): the mean over the live shards of their
levels plus the work waiting in the remote queue (water between the vessels is water the vessels will
share). Positive, the shard pushes about that many URLs, in blocks of about ``block`` URLs of whole hosts;
negative, it pulls about that many back, a block at a time, while the remote queue has blocks. A difference under half a block moves nothing
(a block is the unit of transfer; smaller differences would only make blocks go back and forth). A shard
with no ready work at all pulls a block whenever one waits, whatever the mean says: the remote queue is
work nobody is doing.

Hosts move whole, so a host moves only if it holds fewer URLs than the gap between the pushing shard and the
lowest live shard (``largest_host``): moving a larger one would only turn the gap around, and the same host
would go back and forth at every heartbeat (found on the testbed: a host of 11 URLs in a crawl's tail
travelled between three shards for 30 s).

What a shard moved is taken off (or added to) its own smoothed level at once (``Levels.moved``), so the
window's memory of the level before the transfer does not make it move the same surplus twice.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(slots=True)
class Levels:
    """Each shard's level over the last ``window`` heartbeats."""

    window: int = 3
    _samples: dict[int, deque[float]] = field(default_factory=dict)

    def add(self, shard: int, level: float) -> None:
        self._samples.setdefault(shard, deque(maxlen=max(1, self.window))).append(float(level))

    def moved(self, shard: int, urls: float) -> None:
        """``shard`` pushed (``urls`` > 0) or pulled (< 0) work: its remembered levels change by as much."""
        for i, v in enumerate(self._samples.get(shard, ())):
            self._samples[shard][i] = max(0.0, v - urls)

    def keep_only(self, shards: Iterable[int]) -> None:
        """Forget shards no longer live."""
        live = set(shards)
        for s in [s for s in self._samples if s not in live]:
            del self._samples[s]

    def smoothed(self) -> dict[int, float]:
        return {s: sum(v) / len(v) for s, v in self._samples.items() if v}


def volume(mine: int, levels: Mapping[int, float], *, block: int, queued: float = 0.0) -> float:
    """S5's transport volume of shard ``mine``: its smoothed level minus the common level, the mean of
    ``levels`` (every live shard's, its own included) with the ``queued`` URLs of the remote queue shared
    out; 0 when the difference is under half a block or ``mine`` is unknown."""
    if mine not in levels or len(levels) < 2:
        return 0.0
    v = levels[mine] - (sum(levels.values()) + queued) / len(levels)
    return v if abs(v) >= block / 2 else 0.0


@dataclass(frozen=True, slots=True)
class Move:
    """What one heartbeat asks of a shard: push ``push`` URLs (in blocks), or pull up to ``pull`` blocks."""

    push: int = 0
    pull: int = 0


def decide(mine: int, levels: Mapping[int, float], *, ready_now: int, queued_blocks: int, block: int,
           balance: bool = True, halted: bool = False) -> Move:  # fmt: skip
    """The rule as a decision: ``ready_now`` is the shard's level this instant, ``queued_blocks`` the blocks
    waiting in the remote queue (about ``block`` URLs each). Without ``balance`` (the rule off) nothing is
    pushed; a shard with nothing ready still takes what waits in the remote queue. A ``halted`` shard (a
    re-crawl's stop file: it issues nothing more) moves nothing: its work and the waiting blocks stay for the
    shards' ``--resume``."""
    if halted:
        return Move()
    queued = float(queued_blocks * block)
    share = _share(mine, levels, queued_blocks=queued_blocks, block=block)
    if ready_now <= 0 and queued_blocks > 0:
        want = -volume(mine, levels, block=block, queued=queued) if balance else 0.0
        return Move(pull=min(queued_blocks, share, max(1, round(want / block))))
    if not balance:
        return Move()
    v = volume(mine, levels, block=block, queued=queued)
    if v > 0:
        return Move(push=min(int(v), ready_now))
    if v < 0 and queued_blocks > 0:
        return Move(pull=min(queued_blocks, share, max(1, round(-v / block))))
    return Move()


def _share(mine: int, levels: Mapping[int, float], *, queued_blocks: int, block: int) -> int:
    """The blocks of the remote queue that are ``mine`` to pull: the queue shared among the shards that
    pull at this common level (those at least half a block under it, or with nothing), in proportion to
    how far under it each is; 1 at least. Without it the first to beat after a push takes every block,
    its window still remembering the pusher's level from before the push (found on the testbed: one of
    two idle shards took all, the other none)."""
    if queued_blocks <= 0 or mine not in levels:
        return max(1, queued_blocks)
    common = (sum(levels.values()) + queued_blocks * block) / len(levels)
    short = {s: max(0.0, common - v) for s, v in levels.items() if v <= 0 or common - v >= block / 2}
    total = sum(short.values())
    mine_short = max(0.0, common - levels[mine])
    if total <= 0 or mine_short <= 0:
        return 1
    return max(1, math.ceil(queued_blocks * mine_short / total))


def largest_host(mine: int, levels: Mapping[int, float]) -> float:
    """Hosts pushed by ``mine`` hold fewer URLs than this: its level minus the lowest live shard's (a host
    that large, moved, leaves the two as far apart as before, the other way round)."""
    if mine not in levels:
        return 0.0
    return levels[mine] - min(levels.values())
