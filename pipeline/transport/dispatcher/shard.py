"""A dispatcher shard among its peers (S5, ``dispatch.shards`` > 1): its lease, and what it asks of the others.

One ``ShardPeer`` per sharded dispatcher process. ``join`` takes the shard's lease before the process does
anything else (``pipeline.storage.shardleases``): a second process for the same shard stops there with one
line. While it runs, ``may_act`` is the fence checked before every batch goes out (the lease valid on this
process's clock), and ``lost`` says a peer has taken the shard over (this process must stop).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pipeline.observe.errors import UsageError
from pipeline.settings import Settings
from pipeline.storage.base import Store
from pipeline.storage.factory import from_settings
from pipeline.storage.shardleases import ShardLease, ShardTaken

log = logging.getLogger(__name__)


class ShardRefused(UsageError):
    """This shard is already running elsewhere (exit 2, one line)."""


class ShardPeer:
    def __init__(self, settings: Settings, store: Store, *, clock: Callable[[], float],
                 open_store: Callable[[], Store] | None = None) -> None:  # fmt: skip
        d = settings.dispatch
        self.settings = settings
        self.service, self.shards, self.index = d.service, d.shards, d.shard
        self.store = store
        self.clock = clock
        opener = open_store or (lambda: from_settings(settings.store, ""))
        self.lease = ShardLease(store, opener, self.service, self.index, heartbeat_s=d.shard_heartbeat_s, clock=clock)

    def join(self) -> None:
        try:
            got = self.lease.join()
        except ShardTaken as exc:
            raise ShardRefused(str(exc)) from None
        log.info("dispatcher shard %d of %d of service %s (lease generation %d)", self.index, self.shards,
                 self.service, got.gen)  # fmt: skip

    def may_act(self) -> bool:
        return self.lease.holds()

    def lost(self) -> bool:
        return self.lease.lost()

    def leave(self, *, done: bool) -> None:
        self.lease.leave(done=done)
