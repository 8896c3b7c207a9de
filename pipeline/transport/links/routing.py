"""Where a round's links report goes when the dispatcher runs as shards (``dispatch.shards`` > 1).

Each host's new pending URLs go to the shard that owns the host (its record in the store,
``pipeline.storage.hostowners``). A host nobody owns yet is claimed here "at home" (S5: produce and consume
at home) for the shard that owns the host of the page that linked to it (``LinksReport.found_by``): the
shard whose batch found the link. Failing that (the linking host is in transit, or its owner is not live),
for one of the live shards whose segments the round read, chosen by the host's hash; failing that, one of
the live shards. A host in transit (pushed to the remote queue in a block) gets its new URLs counted on its
transit record: whoever pulls the block takes them too. The claim and the count are compare-and-sets.

Each shard's report also carries the round's segments its own batches wrote (its link progress waits for
those); segments of shards that are not live are left out. A host whose owner is not live is still sent to
that owner's results queue: its live peers drain it (``pipeline.transport.dispatcher.shardhosts``) and one
of them takes the dead shard's hosts over. One read per host of the round, one more per new host.
"""

from __future__ import annotations

import time
import zlib
from collections import defaultdict
from collections.abc import Callable

from pipeline.storage.base import Store
from pipeline.storage.hostowners import HostOwners, Owner
from pipeline.storage.shardleases import live_shards
from pipeline.transport.wire.replies import LinksReport
from pipeline.transport.wire.shardwire import shard_of_segment


def _pick(host: str, shards: list[int]) -> int:
    return shards[zlib.crc32(host.encode()) % len(shards)]


class ShardRouter:
    def __init__(self, store: Store, service: str, shards: int, *, skew_s: float,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.owners = HostOwners(store, service, clock=clock)
        self.store, self.service, self.shards = store, service, shards
        self.skew_s = skew_s
        self.clock = clock
        self.claimed = self.in_transit = 0

    def route(self, report: LinksReport) -> dict[int, LinksReport]:
        """The report each shard gets (shards with nothing for them get none)."""
        live = live_shards(self.store, self.service, now=self.clock(), skew_s=self.skew_s)
        segments: dict[int, list[str]] = defaultdict(list)
        for seg in report.segments:
            shard = shard_of_segment(seg, self.service, self.shards)
            if shard is not None and shard in live:
                segments[shard].append(seg)
        live = live or list(range(self.shards))  # nobody live: the counts wait in the queues for the shards
        nearby = sorted(segments) or live
        hosts: dict[int, dict[str, int]] = defaultdict(dict)
        known: dict[str, Owner | None] = {}
        for host, count in report.hosts.items():
            owner = self._owner(host, count, report, known, live, nearby)
            if owner is not None:
                hosts[owner][host] = hosts[owner].get(host, 0) + count
        return {s: LinksReport(tuple(segments.get(s, ())), hosts.get(s, {}))
                for s in sorted(set(segments) | set(hosts))}  # fmt: skip

    def _owner(self, host: str, count: int, report: LinksReport, known: dict[str, Owner | None],
               live: list[int], nearby: list[int]) -> int | None:  # fmt: skip
        """The shard to tell about ``count`` new URLs of ``host``; None when they were counted on its transit
        record (or the record could not be settled: the shards' pending scan finds the URLs)."""
        rec = self._read(host, known)
        for _ in range(4):
            if rec is not None and not rec.in_transit:
                return rec.shard
            if rec is not None:  # in transit: counted on its record, for whoever takes its block
                got = self.owners.add_in_transit(host, count)
                if got is not None and got.in_transit:
                    self.in_transit += 1
                    return None
                rec = known[host] = got  # taken out of transit meanwhile: tell its new owner
                continue
            mine, rec = self.owners.claim(host, self._home(host, report, known, live, nearby), read=False)
            if mine is not None:
                self.claimed += 1
                known[host] = mine
                return mine.shard
            known[host] = rec
        return None

    def _read(self, host: str, known: dict[str, Owner | None]) -> Owner | None:
        if host not in known:
            known[host] = self.owners.read(host)
        return known[host]

    def _home(self, host: str, report: LinksReport, known: dict[str, Owner | None], live: list[int],
              nearby: list[int]) -> int:  # fmt: skip
        source = report.found_by.get(host)
        if source:
            rec = self._read(source, known)
            if rec is not None and not rec.in_transit and rec.shard in live:
                return rec.shard
        return _pick(host, nearby)
