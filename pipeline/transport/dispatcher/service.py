"""The fleet dispatcher process: CrawlCore driven by AMQP instead of in-process calls. It never decodes
a body or extracts a link: nodes store their pages and reply once per batch, and the link jobs
(``crawlfleet links``, links/service.py) feed the pending set in the store.

Each fetch node (a Celery worker on ``fetch.<node>``) appears as ``slots`` virtual fetchers
``<node>#<i>`` (dispatcher/nodes.py), so S3's per-fetcher sizing and the frontier's per-fetcher host leases
work unchanged. The node that gets the next batch is S1's choice, ``u = p*s + q - r`` from each node's
heartbeat (largest u > t wins; no round-robin); its idle fetcher asks ``CrawlCore.next_batch`` (quota
admission) and the batch is published to its node's queue, tagged with the node's incarnation (a
restarted node drops batches meant for its previous life, which the dispatcher has already re-queued).

Heartbeats (S1, fanout exchange): a new incarnation re-registers the node's fetchers (expiring what
they held) and purges its queue; a node silent for ``missed_heartbeats`` periods is excluded and its
queue purged. Results are de-duplicated per (serial, URL) before the core, which drops unknown serials.

Crash safety: results are journaled by the core before they are acked; a restarted dispatcher first
journals whatever its predecessor's batches still bring (``recovery.drain_previous``), then resumes.
Time the dispatcher could not hear the fleet (broker down or stalled, the dispatcher itself stopped)
pauses its clock (``BrokerSession.paused_s``) instead of killing every fetcher at once.
``fleet-events.jsonl`` records issues, completions, expiries and node changes. How the crawl is opened
before the loop (recovery, seeds, the core, link rules, encoder, serial responder) is dispatcher/opening.py;
what it does with each message it hears (replies, links reports, heartbeats, submits) is dispatcher/inbox.py;
its periodic work (liveness, leases, the serial table) is dispatcher/tick.py.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from pipeline.crawl.core import CrawlCore
from pipeline.dispatch.admission import second_of_minute
from pipeline.frontier.stall import StallWatch
from pipeline.observe.metrics import LatestSnapshot, MetricsServer
from pipeline.settings import Settings
from pipeline.storage.factory import from_settings
from pipeline.transport.dispatcher.inbox import Inbound
from pipeline.transport.dispatcher.linkprogress import LinkProgress
from pipeline.transport.dispatcher.nodes import FleetNodes
from pipeline.transport.dispatcher.opening import CrawlOpening
from pipeline.transport.dispatcher.shard import ShardPeer
from pipeline.transport.dispatcher.state import EXPIRED_KEPT, FleetCounters, Issued, fleet_summary, quota_line
from pipeline.transport.dispatcher.tick import Periodic
from pipeline.transport.wire.batchsend import BatchEncoder
from pipeline.transport.wire.pika_session import make_session, send_task, take_unconfirmed
from pipeline.transport.wire.serialcheck import SerialResponder, SerialTable
from pipeline.transport.wire.shardwire import wire_name

log = logging.getLogger(__name__)

# Liveness, leases, the serial table and the stats row are checked every quarter heartbeat period, at
# most every TICK_S: a node's death (two periods of silence) is then seen within an eighth of its window.
TICK_S = 0.5
# Pending URLs, a host ready by its clock and no batch out for this long: the log says where the URLs sit.
STALL_S = 20.0


class FleetDispatcher(CrawlOpening, Periodic, Inbound):
    """One crawl (one service) dispatched over RabbitMQ. ``run()`` returns the summary dict."""

    def __init__(
        self,
        settings: Settings,
        *,
        out_dir: Path,
        seeds: Sequence[str] = (),
        resume: bool = False,
        serve: bool = False,
        metrics_port: int | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.service = settings.dispatch.service
        d = settings.dispatch
        self.wire = wire_name(self.service, d.shard, d.shards)  # what its batches and queues are named
        self.out_dir = out_dir
        self.seeds = list(seeds)
        self.resume = resume
        self.serve = serve
        self.metrics_port = metrics_port  # Prometheus /metrics and an HTML /status page (#9); None = off
        self._metrics: MetricsServer | None = None
        self._snapshot = LatestSnapshot()
        self._wall, self._mono = wall, monotonic
        self.hb_timeout = d.heartbeat_s * d.missed_heartbeats
        self.tick_s = min(TICK_S, d.heartbeat_s / 4)
        self.session = make_session(settings.fleet.amqp_client, settings.fleet, service=self.wire,
                                    submit_service=self.service,
                                    heartbeat_ttl_s=self.hb_timeout, on_connect=self._on_connect,
                                    stall_s=d.heartbeat_s / 2, probe_after_s=d.heartbeat_s / 2,
                                    grace_s=self.hb_timeout, monotonic=monotonic)  # fmt: skip
        self._last_clock = float("-inf")
        self.core: CrawlCore | None = None
        self.counters = FleetCounters()
        self.fleet = FleetNodes(shards=d.shards, shard=d.shard)
        self._issued: dict[int, Issued] = {}
        self._expired: dict[int, None] = {}  # serials expired here, the newest EXPIRED_KEPT (inbox.py)
        self._busy = self.fleet.busy
        self._unsent: list[int] = []
        self._changed = True  # something happened that may let a batch go out (see _loop)
        self._retry_at = 0.0  # monotonic time of the next dispatch round without a message (see _loop)
        self._serials_version = self._serials_sent = 0  # the serial table is rebuilt only after a change
        self._scope_json: dict[str, Any] | None = None
        self._stopping = False
        self._stop_now = False  # a second stop signal: leave at once, even a shard's drain
        self._stop_at = 0.0
        self._sink_json: dict[str, Any] | None = None
        self._encoder: BatchEncoder | None = None
        self.links = LinkProgress(clock=monotonic)
        self._events: IO[str] | None = None
        self._stats_file: IO[str] | None = None
        self.serials = SerialTable()  # S1's serial check: what nodes ask before fetching a batch
        self._responder: SerialResponder | None = None
        self.shard: ShardPeer | None = None  # with dispatch.shards > 1: this shard among its peers (S5)
        self._idle = False  # a shard's own end test, at the last turn of the loop
        self._stall = StallWatch(after_s=STALL_S)  # pending URLs and nothing out for that long: say why

    def clock(self) -> float:
        """Wall time minus the time the dispatcher could not hear the fleet (``BrokerSession.paused_s``).
        Never goes back: a stall is counted when it ends, after reads made during it."""
        self._last_clock = max(self._last_clock, self._wall() - self.session.paused_now())
        return self._last_clock

    def stop(self) -> None:
        """Stop dispatching and return (from a signal handler). In-flight batches finish on the workers;
        their results wait in the results queue for the next dispatcher. A shard (``dispatch.shards`` > 1)
        first waits for its batches out to be answered, for at most ``dispatch.lease_s``, keeping its lease
        (a peer would take its hosts over and fetch those batches' URLs again); a second signal leaves at
        once."""
        if self._stopping:
            self._stop_now = True
            return
        self._stop_at = self._mono()
        self._stopping = True
        if self.shard is not None:
            self.shard.stopping = True

    def _draining(self) -> bool:
        """A stopping shard still has batches out, and has not waited ``dispatch.lease_s`` for them."""
        return (self._stopping and self.shard is not None and not self._stop_now and bool(self._issued)
                and self._mono() - self._stop_at < self.settings.dispatch.lease_s)  # fmt: skip

    # --- run ---------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._events = open(self.out_dir / "fleet-events.jsonl", "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self._stats_file = open(self.out_dir / "stats.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        store = from_settings(self.settings.store, self.out_dir / "crawl.db")
        started = self._mono()
        summary: dict[str, Any] = {}
        try:
            if self.settings.dispatch.shards > 1:  # one process per shard: refused here, before the broker
                self.shard = ShardPeer(self.settings, store, clock=self.clock, wall=self._wall, monotonic=self._mono,
                                       event=self._event)  # fmt: skip
                self.shard.join(resume=self.resume)  # a crashed predecessor's lease is waited out
            while not self.session.connect() and not self._stopping:
                time.sleep(self.session.retry_s)
            early = self._open_crawl(store)
            if self._stopping:
                return {"interrupted": True}
            for hb in early:
                self._on_heartbeat(hb)
            self._loop()
        finally:
            if self._responder is not None:
                self._responder.stop()
                self.counters.serial_checks = self._responder.answered
            if self._metrics is not None:
                self._metrics.stop_thread()
            if self.core is not None:
                self.core.close()
                summary = self._summary(started)
                (self.out_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
            if self.shard is not None:
                self.shard.leave(done=bool(summary) and not summary.get("fleet", {}).get("interrupted", True))
            store.close()
            self.session.close()
            for fh in (self._events, self._stats_file):
                if fh is not None:
                    fh.close()
        return summary

    def _loop(self) -> None:
        core = self.core
        assert core is not None
        last_tick = 0.0
        was_done = False
        while not self._stopping or self._draining():
            if self.shard is not None and self.shard.lost():
                log.error("dispatcher shard %d: a peer took this shard over (its lease ran out): stopping",
                          self.shard.index)  # fmt: skip
                break
            self.counters.loop_turns += 1
            # Event-driven: a message (a reply, heartbeat, links report, submit) or a tick wakes the loop;
            # with an idle slot, so does the time at which the last empty round said work may free
            # (``_retry_after``). Rounds that could only find nothing are not run (#18: 89.5% were empty).
            tick_s = self.tick_s
            wait = tick_s
            if self.session.connected and self.fleet.idle_slots() > 0:
                wait = min(tick_s, max(0.0, self._retry_at - self._mono()))
            self.session.pump(wait)
            if self.session.inbox:
                self._changed = True
            self._process_inbox()
            now = self._mono()
            if now - last_tick >= tick_s:
                last_tick = now
                self._tick()
                self._changed = True
            self._resend()
            if self._changed or now >= self._retry_at:
                self._changed = False
                self._dispatch()
            finished = core.done() and not self._issued and not self._unsent and self._links_settled()
            if self.shard is not None:  # a shard ends with its peers (shard.py: idle together, no block left)
                self._idle = finished
                finished = finished and self.shard.finished()
            if finished and not was_done:
                self._event("crawl_done", pages=core.stats.pages)  # --serve keeps going (more submits)
            was_done = finished
            if finished and not self.serve:
                break
        self._tick()

    # --- batches -----------------------------------------------------------------------------------
    def _links_settled(self) -> bool:
        return self.links.settled(self._restore_pending)

    def _restore_pending(self) -> int:
        assert self.core is not None
        found = self.shard.restore() if self.shard is not None else self.core.restore_pending()
        if found:
            self._event("pending_restored", urls=found)
        return found

    def _forget_fetcher(self, vfid: str, *, reason: str) -> None:
        """Close our side of a batch the core has expired or is about to (node restart)."""
        serial = self._busy.pop(vfid, None)
        if serial is None:
            return
        issued = self._issued.pop(serial, None)
        if issued is None:
            return
        self._expired[serial] = None
        if len(self._expired) > EXPIRED_KEPT:
            del self._expired[next(iter(self._expired))]
        self._serials_version += 1
        self.counters.expired_batches += 1
        self._event("expired", serial=serial, node=issued.node, reason=reason, urls=[t.url for t in issued.batch.tasks],
                    unanswered=[t.url for t in issued.batch.tasks if t.url_id not in issued.received])  # fmt: skip
        if self.core is not None and reason == "restarted":
            # Dispatcher.register has expired the serial (and re-queued its URLs); this completion is then
            # refused, but it drops the serial from CrawlCore's in-flight table, which register does not.
            self.core.on_batch_done(serial, fetcher_id=vfid, pages=0, elapsed_s=0.0)

    def _dispatch(self) -> None:
        """S1's slave choice until no node is a candidate or the core gives nothing (quota, empty)."""
        core = self.core
        if core is None or not self.session.connected or self._stopping:
            return
        if self.shard is not None and not self.shard.may_act():
            return  # the shard's lease is not valid now (renewal late): no batch may go out (a fence)
        d = core.dispatcher
        s = second_of_minute(self.clock())
        self.counters.dispatch_rounds += 1
        sent = self.counters.batches_sent
        while True:
            picked = self.fleet.pick(d, self.service, s=s)
            batch = core.next_batch(picked[1]) if picked is not None else None
            if picked is None or batch is None:
                # No node has u > t (S1 answers no), or nothing is leasable now (or admitted): ask again
                # when that may have changed.
                self.counters.empty_rounds += self.counters.batches_sent == sent
                self._retry_at = self._mono() + self._retry_after(s1_said_no=picked is None)
                return
            node, vfid = picked
            choice = self.fleet.last_choice
            self._issued[batch.serial] = Issued(batch, node.name, vfid)
            self._busy[vfid] = batch.serial
            self.serials.issue(batch.serial, vfid)  # before it is sent: its node may ask at once
            urls = {"urls": [t.url for t in batch.tasks]} if self.shard is not None else {}  # a peer's takeover
            self._event("issue", serial=batch.serial, node=node.name, vfid=vfid, n=len(batch.tasks),
                        u=round(choice.u, 1) if choice else None, p=node.p, q=node.q, want=d.batch_size(vfid), **urls)  # fmt: skip
            self._send(batch.serial)

    def _send(self, serial: int) -> None:
        issued = self._issued.get(serial)
        node = self.fleet.nodes.get(issued.node) if issued is not None else None
        if issued is None or node is None or self._encoder is None:
            return
        if not self.session.connected:
            self._unsent.append(serial)
            return
        batch = issued.batch if self.wire == self.service else dataclasses.replace(issued.batch, service=self.wire)
        msg = self._encoder.encode(batch, node=node.name, incarnation=node.incarnation,
                                   expires_s=self.settings.dispatch.lease_s)  # fmt: skip
        try:
            send_task(self.session, msg, serial=serial)
        except Exception as exc:  # broker trouble: keep it and send again once reconnected
            self._unsent.append(serial)
            self.session.lost(exc)
            return
        self.counters.batches_sent += 1
        self.counters.batch_bytes += len(msg.body)

    def _resend(self) -> None:
        self._unsent += take_unconfirmed(self.session)  # pika: nacked, or lost with a connection
        if not self._unsent or not self.session.connected:
            return
        pending, self._unsent = self._unsent, []
        self._changed = True
        for serial in pending:
            self.counters.resends += 1
            self._send(serial)

    def _on_connect(self) -> None:
        for node in self.fleet.nodes:
            self.session.declare_fetch_queue(node)

    # --- output ------------------------------------------------------------------------------------
    def _event(self, kind: str, **fields: Any) -> None:
        if self._events is not None:
            self._events.write(json.dumps({"t": round(self._wall(), 3), "ev": kind, **fields}) + "\n")

    def _summary(self, started: float) -> dict[str, Any]:
        core = self.core
        assert core is not None
        s = self.session
        out = fleet_summary(core.summary(), self._mono() - started, self.counters, nodes=sorted(self.fleet.nodes),
                            reconnects=s.reconnects, stalls=s.stalls, paused_s=s.paused_s,
                            interrupted=self._stopping and not core.done(), node_heartbeats=self.fleet.heartbeats(),
                            link_lag=self.links.lag_summary(),
                            quota=quota_line(self.settings.dispatch.quotas_file, core.dispatcher.quota_of(self.service)))  # fmt: skip
        if self.shard is not None:
            out["shard"] = self.shard.summary()
        return out
