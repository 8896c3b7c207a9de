"""S1's per-minute budget of a service divided among the dispatcher shards alive (S1 across S5's peers).

Each shard admits with S1's rule on its own share of the service's quota m. The division is decided per
minute, once: the **plan** of minute M names the shards that share M (its ``members``), and every member
grants at most ``m / len(members)`` per second of M (S1's ``floor(s * m_i) - n_i``); a shard not in the
plan grants nothing in M. Since ``sum(floor(s * m_i)) <= floor(s * sum(m_i)) = floor(s * m)``, the
shards' grants by second s of M never pass S1's bound for the service, whatever happens during M.

Why this holds across deaths and slow shards:

- A plan never changes once decided (the caller keeps it where the first decision wins and every shard
  reads the same one), and a shard grants in minute M only after it has read M's plan (``fraction`` is
  None until then: no grant). So the shares of one minute always add up to at most m.
- A dead shard's share moves to the live ones from the next minute whose plan is decided once its
  membership has lapsed (``plan_members``): the URLs it granted in its last minute stay counted there.
- A shard that is only slow keeps its share: it stays a member for as long as its lease is live, and a
  slow shard excluded because its lease lapsed grants nothing in that minute even if it comes back (it
  reads the plan). A shard that (re)joins mid-minute waits for the next minute's plan.

Membership (``plan_members``), from each shard's lease deadline as the store holds it (wall seconds;
0 when released: taken over, stopped or done): a shard whose lease runs (``deadline + skew > now``) or
that has no lease yet (not started: its share waits for it, as with a fixed split) is a member; a shard
whose lease ran out or was released is not. The deciding shard is always a member.

Pure: the caller reads the leases and stores the plans (``pipeline.transport.dispatcher.shardquota``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

KEEP_MINUTES = 3  # plans remembered per shard: the current minute and the two before it


class PlanError(ValueError):
    """A stored plan that does not decode."""


@dataclass(frozen=True, slots=True)
class SharePlan:
    """The shards that share minute ``minute`` of S1's budget, each an equal part."""

    minute: int
    members: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.members or any(s < 0 for s in self.members) or len(set(self.members)) != len(self.members):
            raise PlanError(f"a plan needs distinct shard numbers >= 0, got {self.members!r}")

    def fraction(self, shard: int) -> float:
        """The part of the service's quota ``shard`` may grant in this minute: 1/members, 0 outside."""
        return 1.0 / len(self.members) if shard in self.members else 0.0

    def encode(self) -> str:
        return json.dumps({"minute": self.minute, "members": list(self.members)}, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> SharePlan:
        try:
            data = json.loads(text)
            return cls(int(data["minute"]), tuple(sorted(int(s) for s in data["members"])))
        except (ValueError, TypeError, KeyError) as exc:
            raise PlanError(f"bad quota plan {text!r}: {exc}") from None


def plan_members(deadlines: Mapping[int, float], shards: int, *, decider: int, now: float,
                 skew_s: float) -> tuple[int, ...]:  # fmt: skip
    """The members of a plan decided at ``now`` by shard ``decider``: of shards 0..shards-1, those with a
    running lease (``deadline + skew_s > now``) or with none yet, and the decider (see the module docstring)."""
    out = {s for s in range(shards) if s not in deadlines or deadlines[s] + skew_s > now}
    return tuple(sorted(out | {decider}))


@dataclass(slots=True)
class MinuteShares:
    """One shard's view of the plans: its part of the quota in a minute, None while that plan is unknown."""

    shard: int
    plans: dict[int, SharePlan] = field(default_factory=dict)

    def fraction(self, minute: int) -> float | None:
        plan = self.plans.get(minute)
        return None if plan is None else plan.fraction(self.shard)

    def knows(self, minute: int) -> bool:
        return minute in self.plans

    def learn(self, plan: SharePlan) -> None:
        """Keep ``plan`` (the first one learnt for its minute stays: plans never change) and forget plans
        more than ``KEEP_MINUTES - 1`` minutes older than the newest."""
        self.plans.setdefault(plan.minute, plan)
        newest = max(self.plans)
        for minute in [m for m in self.plans if m <= newest - KEEP_MINUTES]:
            del self.plans[minute]

    def latest(self) -> SharePlan | None:
        return self.plans[max(self.plans)] if self.plans else None

