"""Which dispatcher shard owns each host: one shared record per host in the crawl's store, changed only by a
compare-and-set (``Store.swap_meta``: Thrift1's checkAndPut on HBase, a transaction on SQLite).

The shards themselves hold leases (``pipeline.storage.shardleases``): one process per shard, and a shard
whose lease runs out is dead; its hosts are moved by a live peer (``reassign``).

A host's politeness state (its clock, its leases, its IP) lives in the frontier of exactly one shard, its
*owner*; the host's pending URLs stay in the store's pending set whoever owns it. The record under
``own:SERVICE:HOST`` says who that is:

- absent: nobody yet; the first shard to claim it (``claim``) owns it with generation 1;
- ``s >= 0``: shard ``s`` owns it;
- ``s == IN_TRANSIT``: shard ``f`` pushed it to the service's remote queue (S5's surplus, in a block) with
  ``p`` pending URLs, its clock ``na`` (wall seconds), its address and its page count; a shard that pulls
  the block takes it (``take``) only if the record is still that transit record (the same generation).

Every change of hands bumps the generation, and every change is a swap against the exact text read, so two
shards never both own a host: a stale block, a link report racing a push, a takeover racing a paused owner
each find the record changed and let go. Pure apart from the store; the clock is injected.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from pipeline.storage.base import Store

PREFIX = "own:"
IN_TRANSIT = -1


@dataclass(frozen=True, slots=True)
class Owner:
    """One host's record (see the module docstring). ``raw`` is the text it was read as or written with:
    the expected value of the next swap."""

    host: str
    shard: int
    gen: int
    pending: int = 0  # in transit: URLs pending when pushed (plus those reported since)
    not_before: float = 0.0  # in transit: the host's politeness clock, wall seconds
    ip: str = ""
    issued: int = 0  # pages the host has given (scope.max_pages_per_host)
    pushed_by: int = IN_TRANSIT  # in transit: the shard that pushed it
    at: float = 0.0  # wall time of the write
    raw: str = ""

    @property
    def in_transit(self) -> bool:
        return self.shard == IN_TRANSIT

    def encode(self) -> str:
        obj: dict[str, Any] = {"s": self.shard, "g": self.gen, "at": round(self.at, 3)}
        if self.in_transit:
            obj.update(p=self.pending, na=round(self.not_before, 3), ip=self.ip, i=self.issued, f=self.pushed_by)
        return json.dumps(obj, sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, host: str, text: str | None) -> Owner | None:
        if not text:
            return None
        try:
            o = json.loads(text)
            return cls(host, int(o["s"]), int(o["g"]), int(o.get("p", 0)), float(o.get("na", 0.0)),
                       str(o.get("ip", "")), int(o.get("i", 0)), int(o.get("f", IN_TRANSIT)),
                       float(o.get("at", 0.0)), text)  # fmt: skip
        except (ValueError, KeyError, TypeError):
            return None  # not an owner record: treated as absent, and replaced only through a swap


def key(service: str, host: str) -> str:
    return f"{PREFIX}{service}:{host}"


class HostOwners:
    """The owner records of one service's hosts in ``store``."""

    def __init__(self, store: Store, service: str, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.service = service
        self.clock = clock
        self.swaps = 0  # compare-and-sets made (the store traffic ownership costs)

    def read(self, host: str) -> Owner | None:
        return Owner.decode(host, self.store.get_meta(key(self.service, host)))

    def scan(self) -> Iterator[Owner]:
        """Every record of the service (a prefix scan: start-up, takeover and the end of a crawl only)."""
        start = len(PREFIX) + len(self.service) + 1
        for k, text in self.store.scan_meta(f"{PREFIX}{self.service}:"):
            rec = Owner.decode(k[start:], text)
            if rec is not None:
                yield rec

    def _swap(self, old: Owner | None, new: Owner) -> Owner | None:
        """Write ``new`` over ``old`` (None: over nothing); the record written, or None when it changed."""
        new = replace(new, at=self.clock())
        text = new.encode()
        self.swaps += 1
        if self.store.swap_meta(key(self.service, new.host), old.raw if old is not None else None, text):
            return replace(new, raw=text)
        now = self.read(new.host)  # a lost reply retried answers False for a swap that happened
        return now if now is not None and now.raw == text else None

    def claim(self, host: str, shard: int, *, current: Owner | None = None, read: bool = True) -> tuple[Owner | None, Owner | None]:
        """Make ``shard`` the owner of ``host`` if nobody owns it yet ("at home", S5); ``current``: the record
        as the caller read it (``read=False``: the caller read it as absent). Returns ``(mine, other)``: the
        record now ours (or already ours), or ``None`` and the record as it is (another shard's, or in transit:
        its block decides who takes it)."""
        rec = current if current is not None or not read else self.read(host)
        for _ in range(4):
            if rec is not None:
                return (rec, None) if rec.shard == shard else (None, rec)
            got = self._swap(None, Owner(host, shard, 1))
            if got is not None:
                return got, None
            rec = self.read(host)  # changed under us: look again
        return None, rec

    def push(self, mine: Owner, *, pending: int, not_before: float, ip: str, issued: int) -> Owner | None:
        """Put a host we own in transit (before its block is published); None when it is no longer ours."""
        return self._swap(mine, Owner(mine.host, IN_TRANSIT, mine.gen + 1, pending, not_before, ip, issued,
                                      pushed_by=mine.shard))  # fmt: skip

    def take(self, host: str, gen: int, shard: int) -> Owner | None:
        """Take a host out of transit as its block said it (generation ``gen``); None when the record moved
        on (a link report claimed it meanwhile, or a peer took over the pusher's hosts). A record this
        shard already took from that very transit record (generation ``gen`` + 1, ours) is returned as it
        is: the block is a redelivered copy of one whose taking stopped halfway (the store failed after
        this host's swap), and the caller decides whether the host is already in its frontier."""
        rec = self.read(host)
        if rec is not None and not rec.in_transit and rec.shard == shard and rec.gen == gen + 1:
            return rec
        if rec is None or not rec.in_transit or rec.gen != gen:
            return None
        return self._swap(rec, replace(rec, shard=shard, gen=gen + 1, pushed_by=IN_TRANSIT))

    def add_in_transit(self, host: str, count: int) -> Owner | None:
        """Add ``count`` new pending URLs to a host in transit (the same generation: its block still takes
        it); the record as it is now (None if absent). A record that is not in transit is returned as read."""
        for _ in range(8):
            rec = self.read(host)
            if rec is None or not rec.in_transit:
                return rec
            got = self._swap(rec, replace(rec, pending=rec.pending + count))
            if got is not None:
                return got
        return self.read(host)

    def reassign(self, rec: Owner, shard: int) -> Owner | None:
        """Take over a record of a dead shard (owned by it, or pushed by it and still in transit)."""
        return self._swap(rec, replace(rec, shard=shard, gen=rec.gen + 1, pushed_by=IN_TRANSIT))
