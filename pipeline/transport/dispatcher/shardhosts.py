"""The hosts of one dispatcher shard: which are its own, and how hosts move between it and its peers (S5).

A shard's frontier holds only hosts the shard owns (their records in the store, ``pipeline.storage.hostowners``).
``admit`` is the frontier's gate (``Frontier.admit``), asked once per host new to it:

- a host this shard owns joins at once;
- a host nobody owns is claimed for this shard, "at home" (a submit taken here, a host found in the store's
  pending set with no owner); the crawl's seeds are shared out by a hash of the host (``seed_home``): while
  ``seeding``, a shard claims only its own;
- a host another shard owns stays out; new URLs given here for it (a links report that raced a transfer,
  a seed another shard owns) are kept in ``elsewhere`` and sent on at the next heartbeat (``forward``): to
  its owner's results queue as a links report, or counted on its transit record;
- a host in transit stays out (its block decides who takes it).

While the shard re-reads the store's pending set (``restoring``), nothing is forwarded (each shard re-reads
its own hosts), and hosts seen owned elsewhere are remembered so the next re-read skips them without a
store read. A transit record left behind with no block (its pusher died between the record and the block)
is taken back by the re-read once the remote queue is empty.

Moves: ``push`` gives whole idle hosts from the tail of the local queue to the remote queue in blocks
(their records in transit first, then the block; a block the broker does not take puts them back);
``take_block`` takes a pulled block's hosts whose transit records are still the block's; ``take_over``
moves a dead peer's hosts (its own and those it left in transit) to this shard. A host moves with its
politeness clock (wall seconds on the way, this shard's clock once here), its address and its page count.
"""

from __future__ import annotations

import logging
import zlib
from collections import defaultdict
from collections.abc import Callable, Container
from dataclasses import dataclass, replace

from pipeline.frontier.frontier import Frontier
from pipeline.frontier.handoff import Handed, carry, hand_off, tail, take_in
from pipeline.storage.hostowners import HostOwners, Owner
from pipeline.transport.wire.shardwire import Block, BlockHost

log = logging.getLogger(__name__)


@dataclass(slots=True)
class HostMoves:
    """What moved, for the summary: hosts claimed at home, refused, URLs forwarded; pushed and pulled
    hosts, URLs and blocks; hosts taken over from dead peers."""

    claimed: int = 0
    refused: int = 0
    forwarded_urls: int = 0
    pushed_hosts: int = 0
    pushed_urls: int = 0
    pushed_blocks: int = 0
    push_failures: int = 0
    pulled_hosts: int = 0
    pulled_urls: int = 0
    pulled_blocks: int = 0
    stale_hosts: int = 0  # hosts of pulled blocks whose record had moved on
    taken_over: int = 0
    orphans: int = 0  # transit records with no block, taken back


def seed_home(host: str, shards: int) -> int:
    """The shard that claims a seed's host (the crawl's seeds are shared out by a hash of the host)."""
    return zlib.crc32(host.encode()) % max(1, shards)


class ShardHosts:
    def __init__(self, owners: HostOwners, index: int, *, clock: Callable[[], float], wall: Callable[[], float],
                 transit_grace_s: float) -> None:  # fmt: skip
        self.owners = owners
        self.index = index
        self.clock, self.wall = clock, wall  # the frontier's clock (a dispatcher's pauses left out), wall time
        self.transit_grace_s = transit_grace_s
        self.frontier: Frontier | None = None
        self.owned: dict[str, Owner] = {}
        self.others: dict[str, int] = {}  # host -> the shard seen owning it (re-reads skip it)
        self.arrived: dict[str, Owner] = {}  # orphans taken by a re-read, their clocks not given yet
        self.elsewhere: dict[str, int] = defaultdict(int)  # host -> new URLs given here, to send on
        self.restoring = False
        self.queue_empty = False  # the remote queue held no block at the last heartbeat
        self.released: set[int] = set()  # shards whose process released its lease: their hosts are anyone's
        self.seeding = False  # the crawl's seeds: a host nobody owns is claimed only by its home shard
        self.shards = 1
        self.moves = HostMoves()

    # --- the frontier's gate -------------------------------------------------------------------------
    def admit(self, host: str, urls: int) -> bool:
        if host in self.owned:
            return True
        if host in self.elsewhere:
            self.elsewhere[host] += urls if not self.restoring else 0
            return False
        if self.restoring and host in self.others:
            return False
        rec = self.owners.read(host)
        if rec is None and self.seeding and seed_home(host, self.shards) != self.index:
            return False  # another shard's seed: it claims it when it starts (or any idle shard's re-read)
        if rec is None:
            mine, rec = self.owners.claim(host, self.index, read=False)
            if mine is not None:
                self.moves.claimed += 1
                self.owned[host] = mine
                return True
        elif rec.shard == self.index:
            self.owned[host] = rec  # ours from before (a router's claim for us, an earlier life of the shard)
            return True
        elif rec.shard in self.released:
            return self._reclaim(rec)
        if rec is not None and rec.in_transit and self.restoring and self._orphaned(rec):
            return self._take_orphan(rec)
        if rec is not None and not rec.in_transit:
            self.others[host] = rec.shard
        if not self.restoring:
            self.moves.refused += 1
            self.elsewhere[host] += urls
        return False

    def _reclaim(self, rec: Owner) -> bool:
        """Take a host whose shard has stopped (its lease released: it issues nothing any more)."""
        got = self.owners.reassign(rec, self.index)
        if got is None:
            return False
        self.moves.claimed += 1
        self.owned[rec.host] = got
        self.others.pop(rec.host, None)
        return True

    def _orphaned(self, rec: Owner) -> bool:
        """A transit record whose block is gone: the remote queue is empty and the record is old."""
        return self.queue_empty and self.wall() - rec.at > self.transit_grace_s

    def _take_orphan(self, rec: Owner) -> bool:
        """Take the host of an orphaned transit record. Asked by the frontier as it makes the host's state, so
        the frontier is not touched here (a state made from inside the gate would be overwritten by the outer
        one and its pending URLs counted for ever); its politeness clock, address and page count are given by
        ``settle_arrivals`` once the re-read is over."""
        got = self.owners.take(rec.host, rec.gen, self.index)
        if got is None:
            return False
        self.moves.orphans += 1
        self.owned[rec.host] = got
        self.arrived[rec.host] = got
        return True

    def settle_arrivals(self) -> None:
        """After a re-read of the pending set: the orphans it took get the clocks they came with."""
        assert self.frontier is not None
        for rec in self.arrived.values():
            carry(self.frontier, self._handed(rec, pending=0))
        self.arrived.clear()

    def forward(self, send: Callable[[int, dict[str, int]], None], live: Container[int]) -> None:
        """Send on the URLs given here for hosts this shard does not own (see the module docstring); a host
        whose owner is not live waits for the takeover (at most two heartbeats)."""
        if not self.elsewhere:
            return
        waiting, self.elsewhere = self.elsewhere, defaultdict(int)
        out: dict[int, dict[str, int]] = defaultdict(dict)
        for host, urls in waiting.items():
            rec = self.owners.read(host)
            if rec is not None and rec.in_transit:
                rec = self.owners.add_in_transit(host, urls)
                if rec is not None and rec.in_transit:
                    self.moves.forwarded_urls += urls
                    continue
            if rec is None or rec.shard == self.index or (rec.shard in self.released and self._reclaim(rec)):
                assert self.frontier is not None
                self.frontier.add_pending(host, urls)  # ours now (or nobody's: claimed by the gate)
            elif rec.shard in live:
                out[rec.shard][host] = urls
            else:
                self.elsewhere[host] += urls
        for shard, hosts in out.items():
            send(shard, hosts)
            self.moves.forwarded_urls += sum(hosts.values())

    # --- moves -------------------------------------------------------------------------------------
    def push(self, urls: int, *, block_urls: int, skip: Container[str], below: float,
             publish: Callable[[Block], None], service: str) -> int:  # fmt: skip
        """Give up about ``urls`` pending URLs as whole idle hosts (each with fewer than ``below``) from the
        local queue's tail, in blocks of about ``block_urls``; the URLs given up (0 when nothing could go).
        ``publish`` raises when the broker did not take a block: its hosts come back here."""
        assert self.frontier is not None
        hosts = tail(self.frontier, urls, skip=skip, below=below)
        given = 0
        block: list[BlockHost] = []
        size = 0
        for i, host in enumerate(hosts):
            rec = self.owned.get(host)
            handed = hand_off(self.frontier, host) if rec is not None else None
            if rec is None or handed is None:
                continue
            del self.owned[host]
            nb = handed.not_before - self.clock() + self.wall()
            moving = self.owners.push(rec, pending=handed.pending, not_before=nb, ip=handed.ip, issued=handed.issued)
            if moving is None:
                log.warning("shard %d: host %s changed hands as it was pushed; left to its new owner", self.index, host)
                continue
            block.append(BlockHost(host, moving.gen, handed.pending))
            size += handed.pending
            if size >= block_urls or i == len(hosts) - 1:
                given += self._send(Block(service, self.index, tuple(block)), publish)
                block, size = [], 0
        if block:
            given += self._send(Block(service, self.index, tuple(block)), publish)
        return given

    def _send(self, block: Block, publish: Callable[[Block], None]) -> int:
        try:
            publish(block)
        except ConnectionError as exc:
            self.moves.push_failures += 1
            log.warning("shard %d: the remote queue did not take a block of %d hosts (%s); keeping them",
                        self.index, len(block.hosts), exc)  # fmt: skip
            for bh in block.hosts:
                got = self.owners.take(bh.host, bh.gen, self.index)
                if got is not None:
                    self.owned[bh.host] = got
                    self._politeness(got)
            return 0
        self.moves.pushed_blocks += 1
        self.moves.pushed_hosts += len(block.hosts)
        self.moves.pushed_urls += block.urls
        return block.urls

    def take_block(self, block: Block) -> int:
        """Take the hosts of a pulled block that are still its own; the URLs taken."""
        self.moves.pulled_blocks += 1
        taken = 0
        for bh in block.hosts:
            got = self.owners.take(bh.host, bh.gen, self.index)
            if got is None or bh.host in self.owned:  # moved on, or taken here already (a redelivered copy)
                self.moves.stale_hosts += 1
                continue
            if got.pending < bh.pending:  # taken before a failure halfway: an owned record has no count
                got = replace(got, pending=bh.pending)  # (a transit record's count only grows)
            self.owned[bh.host] = got
            self.others.pop(bh.host, None)
            self._politeness(got)
            taken += got.pending
            self.moves.pulled_hosts += 1
        self.moves.pulled_urls += taken
        return taken

    def take_over(self, dead: int) -> int:
        """Move every host of shard ``dead`` (owned by it, or left in transit by it) to this shard; the
        hosts moved. Their pending counts come from the store's pending set (the caller re-reads it)."""
        moved = 0
        for rec in list(self.owners.scan()):
            if rec.shard != dead and not (rec.in_transit and rec.pushed_by == dead):
                continue
            got = self.owners.reassign(rec, self.index)
            if got is None:
                continue
            self.owned[rec.host] = got
            self.others.pop(rec.host, None)
            if rec.in_transit:
                self._politeness(got)
            moved += 1
        self.moves.taken_over += moved
        return moved

    def _politeness(self, rec: Owner) -> None:
        """A host arriving with its record's clock, address, page count and pending URLs."""
        assert self.frontier is not None
        take_in(self.frontier, self._handed(rec, pending=rec.pending))

    def _handed(self, rec: Owner, *, pending: int) -> Handed:
        """``rec`` as a host arriving here: its wall-time clock on this shard's clock."""
        nb = rec.not_before - self.wall() + self.clock() if rec.not_before else 0.0
        return Handed(rec.host, pending, nb, rec.ip, rec.issued)
