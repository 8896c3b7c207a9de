"""A dispatcher shard among its peers (S5, ``dispatch.shards`` > 1): its lease, its heartbeat, its end.

One ``ShardPeer`` per sharded dispatcher process.

- ``join`` takes the shard's lease before the process does anything else (``pipeline.storage.shardleases``):
  a second process for the same shard stops there with one line. ``may_act`` is the fence checked before
  every batch goes out; ``lost`` says a peer has taken the shard over (this process must stop).
- Every quarter heartbeat (``dispatch.shard_heartbeat_s``) it looks for dead peers and takes the first it
  can over: their lease (fencing them), their hosts (``ShardHosts.take_over``), their pending counts from
  the store, and the links reports waiting in their results queue.
- Every heartbeat (``beat``): the links reports left in the queues of shards that are not running are
  drained here; URLs given here for other shards' hosts are sent on; then S5's communicating-vessels rule
  (``pipeline.dispatch.vessels``) over every live shard's level (its ready URLs, published in the store
  under ``shardstate:SERVICE:I`` with whether it is idle): push whole hosts from the queue's tail to the
  remote queue, or pull blocks from it.
- With a quota file, S1's per-minute budget of the service is divided among the shards alive, a plan per
  minute in the store (``ShardQuota``, ``pipeline/transport/dispatcher/shardquota.py``): known before the
  first grant (``attach``) and at each minute's turn (every tick).
- The crawl is over for a shard (``finished``) when it has been idle, with every live peer idle, no dead
  peer left to take over, nothing to send on and no block waiting (or, in a re-crawl halted by its stop
  file, blocks left for the ``--resume``), at three heartbeats in a row.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Container, Iterator
from typing import Any

from pipeline.crawl.core import CrawlCore
from pipeline.dispatch.vessels import Levels, decide, largest_host
from pipeline.observe.errors import UsageError
from pipeline.settings import Settings
from pipeline.storage.base import Store
from pipeline.storage.factory import from_settings
from pipeline.storage.hostowners import HostOwners
from pipeline.storage.shardleases import ShardLease, ShardTaken, shard_leases
from pipeline.transport.dispatcher.shardhosts import ShardHosts
from pipeline.transport.dispatcher.shardquota import ShardQuota
from pipeline.transport.wire import topology
from pipeline.transport.wire.replies import LinksReport
from pipeline.transport.wire.shardwire import wire_name
from pipeline.transport.wire.sidechannel import SideChannel, SideError

log = logging.getLogger(__name__)
STATE_PREFIX = "shardstate:"
IDLE_BEATS = 3


class ShardRefused(UsageError):
    """This shard is already running elsewhere (exit 2, one line)."""


class ShardPeer:
    def __init__(self, settings: Settings, store: Store, *, clock: Callable[[], float], wall: Callable[[], float],
                 monotonic: Callable[[], float] = time.monotonic, open_store: Callable[[], Store] | None = None,
                 event: Callable[..., None] = lambda kind, **f: None) -> None:  # fmt: skip
        d = settings.dispatch
        self.settings = settings
        self.service, self.shards, self.index = d.service, d.shards, d.shard
        self.hb = d.shard_heartbeat_s
        self.store = store
        self.wall, self._mono, self._event = wall, monotonic, event
        opener = open_store or (lambda: from_settings(settings.store, ""))
        self.lease = ShardLease(store, opener, self.service, self.index, heartbeat_s=self.hb, clock=wall)
        self.hosts = ShardHosts(HostOwners(store, self.service, clock=wall), self.index, clock=clock, wall=wall,
                                transit_grace_s=2 * self.hb)  # fmt: skip
        self.hosts.shards = self.shards
        self.quota = ShardQuota(store, self.service, self.shards, self.index, clock=clock, wall=wall,
                                skew_s=self.lease.leases.skew_s) if d.quotas_file else None  # fmt: skip
        self.side = SideChannel(settings.fleet, self.service)
        self.levels = Levels(window=d.shard_window)
        self.core: CrawlCore | None = None
        self.live: list[int] = [self.index]
        self.peers: dict[int, dict[str, Any]] = {}  # the last state each shard published
        # A stop signal: the dispatcher waits for its batches out; meanwhile this shard moves no host and
        # takes no dead peer over (it is leaving: a peer still running takes its hosts over after it).
        self.stopping = False
        self._next_look = self._next_beat = 0.0
        self._started = monotonic()
        self.idle_beats = 0
        self.beats = self.takeovers = self.drained = 0
        self.spread: list[float] = []  # max/min of the live shards' levels at each beat (the balance)

    # --- the lease ---------------------------------------------------------------------------------
    def join(self, *, resume: bool = False) -> None:
        try:
            got = self.lease.join(resume=resume)
        except ShardTaken as exc:
            raise ShardRefused(str(exc)) from None
        log.info("dispatcher shard %d of %d of service %s (lease generation %d)", self.index, self.shards,
                 self.service, got.gen)  # fmt: skip

    def attach(self, core: CrawlCore) -> None:
        self.core = core
        self.hosts.frontier = core.frontier
        if self.quota is not None:
            self.quota.tick()  # this minute's part of the budget, before the first grant

    def may_act(self) -> bool:
        return self.lease.holds()

    def lost(self) -> bool:
        return self.lease.lost()

    def leave(self, *, done: bool) -> None:
        self.side.close()
        self.lease.leave(done=done)

    @contextlib.contextmanager
    def seeding(self) -> Iterator[None]:
        """Around the crawl core's start: of the seeds' hosts nobody owns, this shard claims its own only."""
        self.hosts.seeding = True
        try:
            yield
        finally:
            self.hosts.seeding = False

    def own_seeds(self) -> int:
        """Claim this shard's seeds another shard put in the store first (they are not new to this one)."""
        with self.seeding():
            return self.restore()

    @contextlib.contextmanager
    def restoring(self) -> Iterator[None]:
        """Around a re-read of the store's pending set: the gate forwards nothing (see ShardHosts)."""
        self.hosts.restoring = True
        try:
            yield
        finally:
            self.hosts.restoring = False

    def restore(self) -> int:
        assert self.core is not None
        with self.restoring():
            found = self.core.restore_pending()
        self.hosts.settle_arrivals()
        return found

    # --- periodic ------------------------------------------------------------------------------------
    def tick(self, *, idle: bool, busy_hosts: Container[str]) -> None:
        """From the dispatcher's tick: ``idle`` = nothing to do here (``FleetDispatcher``'s own end test),
        ``busy_hosts`` = hosts not to push (a refill read in flight)."""
        if self.quota is not None:
            self.quota.tick()  # store I/O only at a minute's turn (or while its plan is unknown)
        now = self._mono()
        if now >= self._next_look:
            self._next_look = now + self.hb / 4
            self._look()
        if now >= self._next_beat:
            self._next_beat = now + self.hb
            try:
                self._beat(idle=idle, busy_hosts=busy_hosts)
            except SideError as exc:  # the broker is away: the next heartbeat tries again
                log.warning("shard %d: heartbeat cut short: %s", self.index, exc)
                self.idle_beats = 0

    def _look(self) -> None:
        if self.stopping:
            return
        for dead in self.lease.dead_peers(self.shards):
            taken = self.lease.take_over(dead)
            if taken is None:
                continue
            moved = self.hosts.take_over(dead.shard)
            found = self.restore()
            reports, messages = self._drain(dead.shard)
            self.lease.taken(taken)
            self.takeovers += 1
            log.warning("shard %d took over dead shard %d: %d hosts, %d pending URLs, %d links reports of %d "
                        "messages in its queue", self.index, dead.shard, moved, found, reports, messages)  # fmt: skip
            self._event("shard_takeover", shard=dead.shard, hosts=moved, pending=found, reports=reports,
                        messages=messages)  # fmt: skip

    def _drain(self, shard: int) -> tuple[int, int]:
        """Apply the links reports waiting in ``shard``'s results queue (its node replies are dropped: the
        nodes stored their outcomes, and the URLs they left are PENDING in the store)."""
        assert self.core is not None
        queue = topology.results_queue(self.settings.fleet, wire_name(self.service, shard, self.shards))
        try:
            reports, messages = self.side.drain(queue)
        except SideError as exc:
            log.warning("shard %d: could not drain shard %d's results queue: %s", self.index, shard, exc)
            return 0, 0
        for report in reports:
            self.core.on_links(report.hosts)
        self.drained += messages
        return len(reports), messages

    def _beat(self, *, idle: bool, busy_hosts: Container[str]) -> None:
        core = self.core
        assert core is not None
        self.beats += 1
        now = self.wall()
        leases = shard_leases(self.store, self.service)
        skew = self.lease.leases.skew_s
        self.live = sorted({s for s, lease in leases.items() if lease.until + skew > now} | {self.index})
        stopped = {s for s, lease in leases.items() if lease.until == 0 and s != self.index}
        for s in sorted(stopped):  # a shard that stopped: what still reaches its queue is worked here
            self._drain(s)
        self.hosts.released = stopped
        self.hosts.forward(self._send_links, self.live)
        queued = self.side.queued_blocks()
        self.hosts.queue_empty = queued == 0
        self._read_peers()
        level = core.frontier.pending
        self.levels.add(self.index, level)
        for s in self.live:
            if s != self.index and s in self.peers:
                self.levels.add(s, float(self.peers[s].get("level", 0)))
        self.levels.keep_only(self.live)
        d = self.settings.dispatch
        smoothed = self.levels.smoothed()
        # The stop file or a stop signal: nothing more is issued, so no host moves.
        halted = self.stopping or (core.recrawl is not None and core.recrawl.halted())
        move = decide(self.index, smoothed, ready_now=level, queued_blocks=queued, block=d.shard_block_urls,
                      balance=d.shard_balance, halted=halted)  # fmt: skip
        if move.push:
            given = self.hosts.push(move.push, block_urls=d.shard_block_urls, skip=busy_hosts,
                                    below=largest_host(self.index, smoothed), publish=self.side.push_block,
                                    service=self.service)  # fmt: skip
            self.levels.moved(self.index, given)
            if given:
                self._event("shard_push", urls=given, level=level)
        took: list[int] = []
        for _ in range(move.pull):
            if not self.side.pull_block(lambda block: took.append(self.hosts.take_block(block))):
                break
        if took:
            self.levels.moved(self.index, -sum(took))
            self._event("shard_pull", urls=sum(took), blocks=len(took), level=level)
        idle = idle and not self.hosts.elsewhere and not move.pull
        self._publish(core.frontier.pending, idle)
        levels = [float(self.peers[s]["level"]) for s in self.live if s != self.index and s in self.peers]
        levels.append(float(core.frontier.pending))
        if len(levels) > 1:
            self.spread.append(max(levels) / max(1.0, min(levels)))
        fresh = all(self.peers.get(s, {}).get("idle") and now - self.peers[s].get("at", 0) < 2 * self.hb
                    for s in self.live if s != self.index)  # fmt: skip
        # A waiting block is work left to do, but not once the crawl is halted: it waits for the --resume.
        quiet = idle and fresh and (queued == 0 or halted) and not self.lease.dead_peers(self.shards)
        self.idle_beats = self.idle_beats + 1 if quiet else 0

    def _read_peers(self) -> None:
        prefix = f"{STATE_PREFIX}{self.service}:"
        for key, text in self.store.scan_meta(prefix):
            tail = key[len(prefix) :]
            with contextlib.suppress(ValueError, TypeError):
                self.peers[int(tail)] = dict(json.loads(text))

    def _publish(self, level: int, idle: bool) -> None:
        state = {"level": level, "idle": idle, "at": round(self.wall(), 3), "hosts": len(self.hosts.owned)}
        self.store.put_meta(f"{STATE_PREFIX}{self.service}:{self.index}", json.dumps(state, sort_keys=True))

    def _send_links(self, shard: int, hosts: dict[str, int]) -> None:
        self.side.send_links(wire_name(self.service, shard, self.shards), LinksReport((), hosts))

    def finished(self) -> bool:
        return self.idle_beats >= IDLE_BEATS and self._mono() - self._started >= IDLE_BEATS * self.hb

    def summary(self) -> dict[str, Any]:
        import dataclasses

        ordered = sorted(self.spread)
        return {"index": self.index, "shards": self.shards, "hosts_owned": len(self.hosts.owned),
                "beats": self.beats, "takeovers": self.takeovers, "drained_messages": self.drained,
                "lease_generation": self.lease.generation, **dataclasses.asdict(self.hosts.moves),
                **(self.quota.summary() if self.quota is not None else {}),
                "balance_median": ordered[len(ordered) // 2] if ordered else None,
                "balance_max": ordered[-1] if ordered else None,
                "side": {"blocks_pushed": self.side.blocks_pushed, "blocks_pulled": self.side.blocks_pulled,
                         "bytes_pushed": self.side.bytes_pushed, "forwarded": self.side.forwarded}}  # fmt: skip
