"""How the fleet dispatcher opens its crawl, before its loop: a mixin of ``FleetDispatcher``.

In order: on ``--resume``, journal what the predecessor's batches still bring (``recovery``) and keep
the heartbeats and submits heard meanwhile; with no seeds anywhere, wait for ``crawlfleet submit``;
build the crawl core (S1 quotas from the quota file, the predecessor's grants of this minute restored);
publish the crawl's link rules to the store for the link jobs; prepare the batch encoder (scope and
sink every batch carries); start S1's serial-check responder and the metrics server if asked.
Contract: returns the heartbeats heard during recovery (for the caller to register), or ``[]`` without
building anything when a stop was asked while waiting.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobs.itemargs import ItemArgs
from pipeline.crawl.core import CrawlCore
from pipeline.dispatch.quotas import Quotas
from pipeline.observe.metrics import LatestSnapshot, MetricsServer
from pipeline.plugins.loading import job_specs
from pipeline.settings import Settings
from pipeline.storage.base import Store
from pipeline.transport.dispatcher.grants import granted_this_minute
from pipeline.transport.dispatcher.recovery import drain_previous
from pipeline.transport.dispatcher.shard import ShardPeer
from pipeline.transport.links.rules import RULES_KEY, CrawlLinkRules
from pipeline.transport.wire.batchsend import BatchEncoder
from pipeline.transport.wire.messages import NodeHeartbeat
from pipeline.transport.wire.pikawire import fleet_parameters
from pipeline.transport.wire.serialcheck import SerialResponder, SerialTable
from pipeline.transport.wire.sink import crawl_sink
from pipeline.transport.wire.taskmsg import scope_to_json

log = logging.getLogger(__name__)


class CrawlOpening:
    """The opening half of ``FleetDispatcher``; the attributes below are the dispatcher's own."""

    settings: Settings
    service: str
    wire: str
    shard: ShardPeer | None
    out_dir: Path
    seeds: list[str]
    resume: bool
    metrics_port: int | None
    session: Any
    core: CrawlCore | None
    serials: SerialTable
    _responder: SerialResponder | None
    _metrics: MetricsServer | None
    _snapshot: LatestSnapshot
    _scope_json: dict[str, Any] | None
    _sink_json: dict[str, Any] | None
    _encoder: BatchEncoder | None
    _stopping: bool
    _wall: Callable[[], float]
    _mono: Callable[[], float]

    def clock(self) -> float:
        raise NotImplementedError

    def _event(self, kind: str, **fields: Any) -> None:
        raise NotImplementedError

    def _open_crawl(self, store: Store) -> list[NodeHeartbeat]:
        early: list[NodeHeartbeat] = []
        if self.resume and store.get_meta("seeds"):
            rec = drain_previous(self.session, self.settings, out_dir=self.out_dir, monotonic=self._mono,
                                 stop=lambda: self._stopping, wire=self.wire)  # fmt: skip
            self._event("recovered", results=rec.results, waited_s=rec.waited_s, timed_out=rec.timed_out)
            early = list(rec.heartbeats.values())
            self.seeds += [u for _, urls in rec.submits for u in urls]
        elif not self.seeds and not store.get_meta("seeds"):
            log.info("no seeds yet: waiting for `crawlfleet submit --service %s`", self.service)
            self.seeds = self.session.wait_for_submits(max_bytes=self.settings.fleet.max_message_bytes,
                                                       stop=lambda: self._stopping)  # fmt: skip
        if self._stopping:
            return []
        d = self.settings.dispatch
        quotas = Quotas.from_settings_file(d.quotas_file)
        # Shards: each admits on its part of S1's budget in the current minute (pipeline/dispatch/quotashares.py).
        share = self.shard.quota.fraction if self.shard is not None and self.shard.quota is not None else None
        with contextlib.ExitStack() as gate:
            if self.shard is not None:
                gate.enter_context(self.shard.seeding())
                if self.resume:  # the store's pending set re-read: each shard takes its own hosts, sends none on
                    gate.enter_context(self.shard.restoring())
            self.core = CrawlCore(self.settings, store, seeds=self.seeds, out_dir=self.out_dir, clock=self.clock,
                                  resume=self.resume, outcomes_by_nodes=True, background_refills=True, quotas=quotas,
                                  quota_share=share,
                                  admit=self.shard.hosts.admit if self.shard is not None else None)  # fmt: skip
        if self.shard is not None:
            self.shard.attach(self.core)
            self.shard.own_seeds()
        if self.resume:  # S1: what the predecessor granted this minute still counts
            for vfid, n in granted_this_minute(self.out_dir / "fleet-events.jsonl", self.clock()).items():
                self.core.dispatcher.restore_grant(self.service, vfid, n)
        self._scope_json = scope_to_json(self.core.scope)
        plug = self.settings.plugins  # the crawl's plugins run in the link jobs; their items go to the item root
        items = ItemArgs(tuple(job_specs(self.settings)), plug.items_root or str(self.out_dir.resolve() / "items"),
                         plug.items_format, plug.item_max_bytes)  # fmt: skip
        rules = CrawlLinkRules.of_crawl(self.core.scope, self.core.traps, max_depth=self.settings.scope.max_depth,
                                        count_inlinks=self.settings.dispatch.priority == "inlinks", items=items)  # fmt: skip
        store.put_meta(RULES_KEY, rules.to_json())
        self._sink_json = crawl_sink(self.settings, self.out_dir).to_json()
        self._encoder = BatchEncoder(scope_json=self._scope_json, sink_json=self._sink_json, wall=self._wall)
        self.serials.minute_bound = bool(self.settings.dispatch.quotas_file)  # S1: grants end with their minute
        if self.settings.dispatch.serial_check:
            self._responder = SerialResponder(fleet_parameters(self.settings.fleet, name="serial-responder"),
                                              self.wire, self.serials).start()  # nodes ask by the batch's name
        if self.metrics_port is not None:
            self._metrics = MetricsServer(self.core.stats, fleet=self._snapshot)
            port = self._metrics.start_in_thread("127.0.0.1", self.metrics_port)
            self._event("metrics", url=f"http://127.0.0.1:{port}/metrics")
        return early
