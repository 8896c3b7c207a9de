"""One process per dispatcher shard, and which shards are alive: leases ``shard:SERVICE:I`` in the crawl's store.

A shard's process holds the lease of its shard (``pipeline.storage.leases``) for as long as it runs, renewed
on a thread of its own (``LeaseKeeper``). A second process for the same shard finds the lease held and
refuses to start (``ShardTaken``, one line naming the holder). A shard whose lease has run out is dead: a
live peer takes its lease over (``ShardLease.take_over``: the next generation, so the dead holder, should it
only have been paused, can no longer renew it and knows it is fenced), moves its hosts to itself
(``pipeline.storage.hostowners``), then marks the lease ``taken`` and released, so a new process may start
the shard again and no other peer takes it over a second time. A shard that ends with nothing left to do
releases its lease marked ``done`` (nothing to take over).

The holder acts as owner only while its lease is valid on its own clock with ``skew_s`` to spare
(``ShardLease.holds``), and a peer takes a lease over only ``skew_s`` after its deadline, so with clocks
within ``skew_s`` of each other a paused shard stops dispatching before a peer moves its hosts.

Timing, from the shards' heartbeat period ``hb`` (``dispatch.shard_heartbeat_s``): ``ttl = 1.5 hb``,
``skew = hb / 8``, renewed every ``ttl / 3``; peers look at the leases every ``hb / 4``: a dead shard is
seen at most ``1.5 hb + hb / 8 + hb / 4`` (under two periods) after its last renewal.

A shard restarted with ``--resume`` while its crashed process's lease still runs waits that lease out, and
says so in a claim ``resume:shard:SERVICE:I`` (its owner and wall time, rewritten on every look): peers
leave a dead shard with a claim younger than a lease period to the process resuming it, so the restarted
shard gets its own lease back instead of racing its peers' takeover at the deadline. A resumer that dies
while waiting stops rewriting its claim, and a period later its peers take the shard over as before.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.storage.base import Store
from pipeline.storage.leases import PREFIX as LEASE_PREFIX
from pipeline.storage.leases import Lease, LeaseKeeper, Leases

RESUME = "resume:"  # prefix of the meta key a resuming shard claims its lease by (see the module docstring)
TAKEN = "taken:"  # owner of a lease a peer took over and released: its hosts have moved
DONE = "done:"  # owner of a lease released by a shard that had nothing left: nothing to take over


def shard_lease(service: str, shard: int) -> str:
    """The lease a shard's process holds while it runs."""
    return f"shard:{service}:{shard}"


def shard_leases(store: Store, service: str) -> dict[int, Lease]:
    """Every shard lease of ``service`` as its record says (live, expired or released)."""
    out: dict[int, Lease] = {}
    prefix = LEASE_PREFIX + f"shard:{service}:"
    for key, text in store.scan_meta(prefix):
        tail = key[len(prefix) :]
        lease = Lease.decode(key[len(LEASE_PREFIX) :], text)
        if tail.isdigit() and lease is not None:
            out[int(tail)] = lease
    return out


def live_shards(store: Store, service: str, *, now: float, skew_s: float) -> list[int]:
    """Shards whose lease has not run out (``skew_s`` past its deadline counts as run out, as for a taker)."""
    return sorted(s for s, lease in shard_leases(store, service).items() if lease.until + skew_s > now)


def timing(heartbeat_s: float) -> tuple[float, float]:
    """``(ttl_s, skew_s)`` of shard leases for a heartbeat period (see the module docstring)."""
    return 1.5 * heartbeat_s, heartbeat_s / 8


def process_owner() -> str:
    """This process, as a lease names its owner: host, pid and a random tail."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class ShardTaken(RuntimeError):
    """Another process holds this shard's lease: one line naming the shard and the holder."""


@dataclass(frozen=True, slots=True)
class Dead:
    """A peer shard whose lease ran out, as read: its lease record (for the takeover's swap)."""

    shard: int
    lease: Lease


class ShardLease:
    """Shard ``shard`` of ``service``'s lease, held by this process (``join`` .. ``leave``)."""

    def __init__(self, store: Store, open_store: Callable[[], Store], service: str, shard: int, *,
                 heartbeat_s: float, owner: str | None = None, clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        ttl_s, skew_s = timing(heartbeat_s)
        self.store, self.service, self.shard = store, service, shard
        self.leases = Leases(store, owner=owner or process_owner(), ttl_s=ttl_s, skew_s=skew_s, clock=clock)
        self._open = open_store
        self.lease: Lease | None = None
        self._keeper: LeaseKeeper | None = None

    @property
    def name(self) -> str:
        return shard_lease(self.service, self.shard)

    @property
    def generation(self) -> int:
        return self.lease.gen if self.lease is not None else 0

    def join(self, *, resume: bool = False) -> Lease:
        """Take the shard's lease and keep it renewed; ``ShardTaken`` when another process holds it. A lease
        a peer holds only for a takeover (``TAKEN`` after it) is waited for, for up to a lease period.

        ``resume`` (the shard restarted after a crash): a lease that is not renewed while it is waited for
        is the crashed process's, left to run out (at most a lease period and the skew); one that is
        renewed meanwhile belongs to a live process, refused as without ``resume``."""
        try:
            got = self._acquire(resume)
        finally:
            if resume:
                self.store.delete_meta([RESUME + self.name])
        self.lease = got
        self._keeper = LeaseKeeper(self._open, self.leases, [got]).__enter__()
        return got

    def _acquire(self, resume: bool) -> Lease:
        deadline = self.leases.clock() + self.leases.ttl_s
        first: Lease | None = None  # with ``resume``: the lease record as first read
        while True:
            got = self.leases.acquire(self.name)
            if got is not None:
                return got
            holder, _ = self.leases.holder(self.name)
            takeover = holder is not None and holder.owner.startswith("takeover:")
            left_over = False
            if resume and holder is not None and not takeover:
                if first is None:
                    first = holder
                    ran_out = min(holder.until, self.leases.clock() + self.leases.ttl_s) + self.leases.skew_s
                    deadline = max(deadline, ran_out + self.leases.ttl_s / 5)
                left_over = holder.token == first.token  # not renewed since: its process is gone
                if left_over:  # peers leave the shard to this process while the claim is fresh
                    self.store.put_meta(RESUME + self.name, f"{self.leases.clock():.3f} {self.leases.owner}")
            if holder is None or not (takeover or left_over) or self.leases.clock() > deadline:
                who = holder.owner if holder is not None else "?"
                left = max(0.0, (holder.until if holder else 0.0) + self.leases.skew_s - self.leases.clock())
                raise ShardTaken(f"dispatcher shard {self.shard} of service {self.service!r} is already running "
                                 f"(lease held by {who}, generation {holder.gen if holder else '?'}, for {left:.1f}s "
                                 "more unless renewed): stop that process first")  # fmt: skip
            time.sleep(self.leases.ttl_s / 10)

    def current(self) -> Lease | None:
        """The lease as last renewed, or None once it is lost (taken over) or was never held."""
        if self.lease is None or self._keeper is None:
            return self.lease
        return self._keeper.current(self.lease)

    def holds(self) -> bool:
        """True while this process may act as the shard (fence before issuing work)."""
        lease = self.current()
        return lease is not None and self.leases.valid(lease)

    def lost(self) -> bool:
        """True when the lease has been taken over: this process is no longer the shard and must stop."""
        return self.lease is not None and self.current() is None

    def leave(self, *, done: bool) -> None:
        """Stop renewing and release the lease (``done``: marked as having nothing left to take over)."""
        if self._keeper is not None:
            self._keeper.__exit__(None, None, None)
        lease = self.current()
        self._keeper = None
        if lease is None:
            return
        current, raw = self.leases.holder(self.name)
        if current is not None and current.token == lease.token:
            owner = (DONE if done else "") + current.owner
            gone = Lease(self.name, owner, current.gen, 0.0, uuid.uuid4().hex)
            self.store.swap_meta(LEASE_PREFIX + self.name, raw, gone.encode())

    # --- peers -------------------------------------------------------------------------------------
    def dead_peers(self, shards: int) -> list[Dead]:
        """Peers (0..shards-1, not this one) whose lease ran out with hosts perhaps still theirs: not
        released ``done`` nor already ``taken`` over, nor claimed by a process resuming them."""
        now = self.leases.clock()
        out = []
        for s, lease in sorted(shard_leases(self.store, self.service).items()):
            if s == self.shard or s >= shards or lease.owner.startswith((TAKEN, DONE)):
                continue
            if lease.until + self.leases.skew_s <= now and not self._resuming(s, now):
                out.append(Dead(s, lease))
        return out

    def _resuming(self, shard: int, now: float) -> bool:
        """A process restarted as ``shard`` with ``--resume`` claimed it within the last lease period."""
        claim = self.store.get_meta(RESUME + shard_lease(self.service, shard))
        try:
            at = float(claim.split(" ", 1)[0]) if claim else 0.0
        except ValueError:
            return False
        return now - at < self.leases.ttl_s + self.leases.skew_s

    def take_over(self, dead: Dead) -> Lease | None:
        """Take a dead peer's lease (the next generation: it can no longer renew); None when another
        process got it first (a peer taking it over, or the shard started again), even when that process
        has already released it marked ``taken`` (free again by its deadline, but no longer the dead one's)."""
        taker = Leases(self.store, owner="takeover:" + self.leases.owner, ttl_s=self.leases.ttl_s,
                       skew_s=self.leases.skew_s, clock=self.leases.clock)  # fmt: skip
        return taker.acquire(shard_lease(self.service, dead.shard), expect=dead.lease)

    def taken(self, lease: Lease) -> None:
        """The takeover is complete: release the peer's lease marked ``taken`` (a new process may start the
        shard; no peer takes it over again)."""
        current, raw = self.leases.holder(lease.name)
        if current is not None and current.token == lease.token:
            gone = Lease(lease.name, TAKEN + self.leases.owner, lease.gen, 0.0, uuid.uuid4().hex)
            self.store.swap_meta(LEASE_PREFIX + lease.name, raw, gone.encode())
