"""What the fleet dispatcher does with each message it hears: a mixin of ``FleetDispatcher``.

``_process_inbox`` takes what the last pump brought and acks through the last message once all are
handled. Per message: a batch reply (``results``) is de-duplicated per (serial, URL) before the core
(which drops serials it did not issue or has expired), and each batch report closes its batch in the
core with S3's time per page measured issue-to-report on our clock; a links report (on the results
queue, ``kind: links``) adds the link jobs' new URLs; a heartbeat registers a new or restarted node's
virtual fetchers (purging a restarted node's queue), feeds each fetcher's share to S1 and renews the
leases of the batches the node says it still runs (a node storing through a store outage keeps its
batches rather than have them fetched again elsewhere); a submit adds
seeds for this service. A message that does not parse (``BadMessage``) is dead-lettered and counted;
it never stops the loop.

May import: pipeline.crawl and everything below it; this room (transport).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.crawl.core import CrawlCore
from pipeline.settings import Settings
from pipeline.storage.segments import key_of as segment_key
from pipeline.transport.dispatcher.linkprogress import LinkProgress
from pipeline.transport.dispatcher.nodes import FleetNodes
from pipeline.transport.dispatcher.state import FleetCounters, Issued
from pipeline.transport.wire.messages import (
    BadMessage,
    NodeHeartbeat,
    decode,
    parse_heartbeat,
    parse_results,
    parse_submit,
)
from pipeline.transport.wire.replies import parse_links


class Inbound:
    """The inbound half of ``FleetDispatcher``; the attributes below are the dispatcher's own."""

    core: CrawlCore | None
    session: Any
    service: str
    wire: str  # the service name on the wire (a shard's own, with dispatch.shards > 1)
    settings: Settings
    counters: FleetCounters
    fleet: FleetNodes
    links: LinkProgress
    _issued: dict[int, Issued]
    _expired: dict[int, None]
    _busy: dict[str, int]
    _serials_version: int
    # The dispatcher's own methods used here: its clock, its event log, closing our side of a batch.
    clock: Callable[[], float]
    _event: Callable[..., None]
    _forget_fetcher: Callable[..., None]

    def _decode(self, message: Any) -> dict[str, Any]:
        return decode(message.body, content_type=message.content_type, content_encoding=message.content_encoding,
                      max_bytes=self.settings.fleet.max_message_bytes)  # fmt: skip

    def _process_inbox(self) -> None:
        items, self.session.inbox = self.session.inbox, []
        for item in items:
            size = len(item.message.body or b"")
            try:
                obj = self._decode(item.message)
                if item.kind == "results" and obj.get("kind") == "links":
                    self._on_links(obj)
                elif item.kind == "results":
                    self.counters.results_messages += 1
                    self.counters.results_bytes += size
                    self._on_results(obj)
                elif item.kind == "heartbeat":
                    self.counters.heartbeats += 1
                    self.counters.heartbeat_bytes += size
                    self._on_heartbeat(parse_heartbeat(obj))
                else:
                    self._on_submit(*parse_submit(obj))
            except BadMessage as exc:
                self.counters.dead_lettered += 1
                self.session.dead_letter(item, str(exc))
        if items:
            self.session.ack_through(items[-1].message)

    def _on_results(self, obj: dict[str, Any]) -> None:
        core = self.core
        assert core is not None
        pack = parse_results(obj, max_body_bytes=self.settings.fleet.max_message_bytes)
        if pack.segment:
            # A reply whose batches this process never issued (a previous incarnation's, or a copy after a
            # broker reconnect) waits for nothing; one whose batches expired here does: the node stored its
            # pages, and their links reach the pending set only through the jobs (linkprogress.py).
            late = bool(pack.reports) and all(rep.serial not in self._issued and rep.serial not in self._expired
                                              for rep in pack.reports)  # fmt: skip
            self.links.on_reply(segment_key(pack.segment), late=late)
        for result in pack.results:
            issued = self._issued.get(result.serial)
            if issued is not None:
                if result.url_id in issued.received:
                    self.counters.duplicate_results += 1
                    continue
                issued.received.add(result.url_id)
            core.on_result(result, stored=pack.stored)  # the core drops serials it did not issue (or expired)
        for rep in pack.reports:
            issued = self._issued.pop(rep.serial, None)
            if issued is None:
                self.counters.late_reports += 1
                continue
            self._serials_version += 1
            self._busy.pop(issued.vfid, None)
            # S3's t_i is the node's time per page for the whole batch: issue to report on our clock (the
            # node's fetch, storing its pages, its reply), not only the fetch the node reports (bench s3).
            took = max(rep.elapsed_s, self.clock() - issued.batch.issued_at)
            core.on_batch_done(rep.serial, fetcher_id=issued.vfid, pages=rep.pages, elapsed_s=took,
                               host_delays=rep.host_delays, host_ips=rep.host_ips, unfinished=rep.unfinished)  # fmt: skip
            segment = {"segment": segment_key(pack.segment)} if pack.segment else {}
            self._event("done", serial=rep.serial, node=issued.node, pages=rep.pages, unfinished=len(rep.unfinished),
                        elapsed_s=round(rep.elapsed_s, 3), **segment)  # fmt: skip

    def _on_links(self, obj: dict[str, Any]) -> None:
        core = self.core
        assert core is not None
        report = parse_links(obj)
        self.links.on_report(report.segments)
        core.on_links(report.hosts)
        self._event("links", segments=len(report.segments), hosts=len(report.hosts), new=sum(report.hosts.values()),
                    names=list(report.segments))  # fmt: skip

    def _on_heartbeat(self, hb: NodeHeartbeat) -> None:
        core = self.core
        assert core is not None
        heard = self.fleet.heard(hb, self.clock())
        node = heard.node
        if heard.event == "node_up":
            if heard.restarted:
                self.counters.purged_messages += self.session.purge_fetch_queue(hb.node)
            self.session.declare_fetch_queue(hb.node)
            for vfid in heard.reregister:
                core.register_fetcher(vfid, address=hb.address)  # expires what the old incarnation held
                self._forget_fetcher(vfid, reason="restarted")
            self._event("node_up", node=hb.node, incarnation=hb.incarnation, slots=hb.slots)
        elif heard.event in ("node_back", "node_lapsed"):
            self._event(heard.event, node=hb.node, incarnation=hb.incarnation)
        for vfid in node.vfids:  # each virtual fetcher is one slot of the node (shards hold some of them)
            core.on_heartbeat(hb.for_fetcher(vfid, share=max(hb.slots, len(node.vfids)), service=self.wire))
        for service, serial, vfid in hb.held:  # batches the node still runs (fetching or storing): leases renewed
            if service == self.wire and vfid in node.vfids:  # the ledger renews only a batch out to that fetcher
                core.dispatcher.renew(vfid, (serial,))

    def _on_submit(self, service: str, urls: list[str]) -> None:
        core = self.core
        assert core is not None
        if service != self.service:
            raise BadMessage(f"submit for service {service!r} reached the queue of {self.service!r}")
        core.add_seeds(urls)
        self._event("submit", urls=len(urls))
