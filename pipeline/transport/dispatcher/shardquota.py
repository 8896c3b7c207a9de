"""A dispatcher shard's part of S1's budget, minute by minute: the plans in the crawl's store.

The rule is ``pipeline.dispatch.quotashares``: the plan of minute M names the shards that share M's budget
of the service, is decided once and read by every shard before its first grant in M. Here the plan of
minute M is the store's meta key ``quotaplan:SERVICE:M``, written only if absent (``swap_meta`` with None:
the first shard to decide wins, and every shard then reads what is stored). ``tick`` (from the shard's
tick, every quarter heartbeat at most) makes sure this shard knows the plan of its current minute: it
reads the key, and when there is none yet it decides the members from the shard leases
(``pipeline.storage.shardleases``) and writes it. Until then ``fraction`` answers None and the crawl core's
admission grants nothing (the minute's unused seconds carry over, S1's rule, so a late read costs no budget).
The minute is the dispatcher's clock's, as S1's admission counts it; the leases' deadlines are wall time.
A store error leaves the minute unknown: the next tick reads again. The plan of a minute ``KEEP`` minutes
old is deleted by whoever writes a new one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pipeline.dispatch.admission import minute_of
from pipeline.dispatch.quotashares import MinuteShares, PlanError, SharePlan, plan_members
from pipeline.storage.base import Store
from pipeline.storage.shardleases import shard_leases

log = logging.getLogger(__name__)
PLAN_PREFIX = "quotaplan:"
KEEP = 10  # minutes a plan stays in the store (for a look at how the budget was divided)


def plan_key(service: str, minute: int) -> str:
    return f"{PLAN_PREFIX}{service}:{minute}"


class ShardQuota:
    """Shard ``index`` of ``shards`` of ``service``: its plans, read from the store or decided and written."""

    def __init__(self, store: Store, service: str, shards: int, index: int, *, clock: Callable[[], float],
                 wall: Callable[[], float], skew_s: float) -> None:  # fmt: skip
        self.store, self.service, self.shards = store, service, shards
        self.clock, self.wall, self.skew_s = clock, wall, skew_s
        self.shares = MinuteShares(index)
        self.decided = 0  # plans this shard wrote
        self.changes = 0  # minutes whose members differ from the minute before's (a shard left or came)

    def fraction(self, minute: int) -> float | None:
        """This shard's part of the service's quota in ``minute``; None while that minute's plan is unknown."""
        return self.shares.fraction(minute)

    def tick(self) -> SharePlan | None:
        """Know the plan of the current minute (read, or decide and write it); None when the store failed."""
        minute = minute_of(self.clock())
        if self.shares.knows(minute):
            return self.shares.plans[minute]
        try:
            plan = self._read(minute) or self._decide(minute)
        except Exception as exc:  # the store away past its retries, or a plan that does not decode
            log.warning("shard %d: quota plan of minute %d not known (%s): no grant until it is",
                        self.shares.shard, minute, exc)  # fmt: skip
            return None
        before = self.shares.latest()
        self.shares.learn(plan)
        if before is not None and before.minute < minute and before.members != plan.members:
            self.changes += 1
            log.info("shard %d: from minute %d the service's quota is shared by shards %s (was %s)",
                     self.shares.shard, minute, list(plan.members), list(before.members))  # fmt: skip
        return plan

    def _read(self, minute: int) -> SharePlan | None:
        text = self.store.get_meta(plan_key(self.service, minute))
        return SharePlan.decode(text) if text is not None else None

    def _decide(self, minute: int) -> SharePlan:
        deadlines = {s: lease.until for s, lease in shard_leases(self.store, self.service).items()}
        members = plan_members(deadlines, self.shards, decider=self.shares.shard, now=self.wall(), skew_s=self.skew_s)
        mine = SharePlan(minute, members)
        if self.store.swap_meta(plan_key(self.service, minute), None, mine.encode()):
            self.decided += 1
            self.store.delete_meta([plan_key(self.service, minute - KEEP)])
        stored = self._read(minute)  # another shard's, when it decided first (or ours, its reply lost)
        if stored is None:
            raise PlanError(f"the plan of minute {minute} was not kept by the store")
        return stored

    def summary(self) -> dict[str, object]:
        plan = self.shares.latest()
        return {"quota_members": list(plan.members) if plan is not None else [],
                "quota_part": plan.fraction(self.shares.shard) if plan is not None else None,
                "quota_plans_decided": self.decided, "quota_changes": self.changes}  # fmt: skip
