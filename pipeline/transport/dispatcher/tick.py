"""The fleet dispatcher's periodic work, every ``tick_s`` of its loop (a quarter heartbeat period, at most 0.5 s): a mixin of ``FleetDispatcher``.
It also says when the loop runs its next dispatch round without a message (``_retry_after``).

Contract of ``_tick``: the core's liveness sweep and lease expiry (its stats row to stats.jsonl), our
side of every batch the core expired closed (``_forget_fetcher``), S1's serial table made equal to
the batches out (rebuilt only when a batch left since the last rebuild: ``issue`` adds as they go),
the links-silence warning, a report of the frontier's hosts when it holds pending URLs it has offered
none of for a while with nothing out (``StallWatch``), and every node silent for ``hb_timeout`` of audible time marked dead and
its queue purged. Nothing here runs per page; a snapshot for /metrics is taken only with a reader.
"""

from __future__ import annotations

import json
import logging
from typing import IO, Any

from pipeline.crawl.core import CrawlCore
from pipeline.frontier.stall import StallWatch
from pipeline.observe.metrics import LatestSnapshot, MetricsServer
from pipeline.settings import Settings
from pipeline.transport.dispatcher.linkprogress import LinkProgress
from pipeline.transport.dispatcher.nodes import FleetNodes
from pipeline.transport.dispatcher.shard import ShardPeer
from pipeline.transport.dispatcher.state import FleetCounters, Issued
from pipeline.transport.wire.serialcheck import SerialTable

log = logging.getLogger(__name__)

# With idle slots, a dispatch round that issued nothing is tried again without a message only when
# something may free work by then (``_retry_after``): a refill read in flight (checked every RETRY_S),
# the frontier's next ready host (a politeness delay ending), or S1's next second (its u grows with s).
RETRY_S = 0.02


class Periodic:
    """The periodic half of ``FleetDispatcher``; the attributes below are the dispatcher's own."""

    core: CrawlCore | None
    session: Any
    service: str
    out_dir: Any
    hb_timeout: float
    counters: FleetCounters
    fleet: FleetNodes
    links: LinkProgress
    serials: SerialTable
    settings: Settings
    tick_s: float
    _issued: dict[int, Issued]
    _busy: dict[str, int]
    _metrics: MetricsServer | None
    _snapshot: LatestSnapshot
    _stats_file: IO[str] | None
    _serials_version: int
    _serials_sent: int
    shard: ShardPeer | None
    _idle: bool
    _stall: StallWatch

    def clock(self) -> float:
        raise NotImplementedError

    def _event(self, kind: str, **fields: Any) -> None:
        raise NotImplementedError

    def _forget_fetcher(self, vfid: str, *, reason: str) -> None:
        raise NotImplementedError

    def _tick(self) -> None:
        core = self.core
        assert core is not None
        self.session.note_deafness()  # a stop since the last pump is not silence of the nodes
        row = core.tick()
        if self._metrics is not None:  # a snapshot walks every fetcher: only for the /metrics reader
            self._snapshot.set(core.dispatcher.snapshot())
        if row is not None and self._stats_file is not None:
            self._stats_file.write(json.dumps(row, separators=(",", ":")) + "\n")
            self._stats_file.flush()
        outstanding = {b.serial for b in core.dispatcher.outstanding()}
        for serial, issued in list(self._issued.items()):
            if serial not in outstanding:  # expired by the core (dead fetcher or lease timeout)
                self._busy[issued.vfid] = serial
                self._forget_fetcher(issued.vfid, reason="expired")
        if self._serials_version != self._serials_sent:  # issue() keeps it current between ticks
            self._serials_sent = self._serials_version
            self.serials.replace((serial, issued.vfid) for serial, issued in self._issued.items())
        self._warn_if_no_links()
        stalled = self._stall.check(core.frontier, now=self.clock(), out=bool(self._issued))
        if stalled is not None:
            log.warning("nothing to issue: %s", stalled)
            self._event("frontier_stalled", report=stalled)
        if self.shard is not None:  # S5 among the dispatcher's peers: takeovers, transfers, the common end
            reader = core.refiller.reader
            self.shard.tick(idle=self._idle, busy_hosts=reader.in_flight if reader is not None else {})
        now = self.clock()
        for node in self.fleet.silent(now, self.hb_timeout):
            log.warning("node %s silent for %.2fs of audible time: dead", node.name, now - node.last_seen)
            purged = self.session.purge_fetch_queue(node.name)
            self.counters.purged_messages += purged
            self._event("node_dead", node=node.name, purged=purged)

    def _warn_if_no_links(self) -> None:
        fields = self.links.warn_if_silent(service=self.service, out_dir=str(self.out_dir))
        if fields is not None:
            self._event("links_silent", **fields)

    def _retry_after(self, *, s1_said_no: bool) -> float:
        """Seconds until a dispatch round may issue what this one could not, with no message between:
        RETRY_S while refill reads are in flight, the wait for the frontier's next ready host, the rest
        of the second when S1 or a quota said no (both change with the second), else a tick (only a
        message, a reply releasing hosts or a links report adding URLs, can free work then)."""
        core = self.core
        assert core is not None
        if core.refiller.in_flight:
            return RETRY_S
        clock = self.clock()
        to_next_second = 1.0 - (clock % 1.0) + 0.001
        if s1_said_no or self.settings.dispatch.quotas_file:
            return to_next_second
        ready = core.frontier.next_ready_at()
        if ready is not None:
            return max(RETRY_S, ready - clock)  # a host already ready but not leased (per-IP cap): poll
        return self.tick_s
