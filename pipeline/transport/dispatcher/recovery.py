"""Restarting the fleet dispatcher without fetching anything twice.

When a dispatcher dies, its workers keep going: they finish the batches they hold and those still
queued for them, and publish the results to the (durable) results queue. The URLs of those batches
are still PENDING in the store. If the new dispatcher rebuilt its frontier at once, it would hand
them out again and they would be fetched twice.

So before ``CrawlCore(resume=True)`` is built, ``drain_previous`` listens: every result that arrives
is appended to the crawl's journal (a fresh segment, after the last checkpoint), and the wait ends
once the fleet is quiet: every node heard from has reported no batch held for a full heartbeat
period since the last result arrived, and the results queue and those nodes' ``fetch.*`` queues are
empty. ``CrawlCore``'s resume then replays the journal, applying those results exactly once (the
store's PENDING rule), before the frontier is rebuilt from what is still pending.

The wait is bounded by ``lease_s``: a batch not back by then is re-issued, as a lease expiry would.
Submits and heartbeats seen meanwhile are handed back to the caller.

A dispatcher shard (``dispatch.shards`` > 1) listens on its own results queue (``wire``, its name on the
wire) and shares every node with its peers, whose batches keep the nodes busy and their queues full. For it
the fleet is quiet once no node heard from holds a batch of the shard's (its heartbeat's ``held``) and its
results queue is empty. A batch of the killed process still waiting in a node's queue is not waited for:
the serial check answers it as no longer held once the resumed shard's responder runs (nothing fetched),
or, without the serial check, its URLs are fetched again: requests the killed process had in flight.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.settings import Settings
from pipeline.storage.journal import SegmentWriter
from pipeline.transport.wire import topology
from pipeline.transport.wire.messages import (
    BadMessage,
    NodeHeartbeat,
    decode,
    parse_heartbeat,
    parse_results,
    parse_submit,
)
from pipeline.transport.wire.session import BrokerSession

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Recovered:
    results: int = 0  # journaled for the resume to apply
    links: int = 0  # link-jobs reports passed over
    duplicates: int = 0
    reports: int = 0
    waited_s: float = 0.0
    timed_out: bool = False
    heartbeats: dict[str, NodeHeartbeat] = field(default_factory=dict)  # latest per node
    submits: list[tuple[str, list[str]]] = field(default_factory=list)


def drain_previous(
    session: BrokerSession,
    settings: Settings,
    *,
    out_dir: Path,
    monotonic: Callable[[], float] = time.monotonic,
    stop: Callable[[], bool] = lambda: False,
    wire: str | None = None,
) -> Recovered:
    """Journal the results of the previous dispatcher's batches until the fleet is quiet; ``wire``: the
    name its batches and results queue go by (a shard's own; default the service)."""
    d = settings.dispatch
    wire = wire or d.service
    hb_timeout = d.heartbeat_s * d.missed_heartbeats
    limit = d.lease_s if d.lease_s > 0 else 120.0
    out = Recovered()
    seen: set[tuple[int, int]] = set()
    heard_at: dict[str, float] = {}
    start = last_result = monotonic()
    writer = SegmentWriter(out_dir / "segments")
    max_bytes = settings.fleet.max_message_bytes
    try:
        while not stop():
            now = monotonic()
            if now - start >= limit:
                out.timed_out = True
                log.warning("recovery: fleet not quiet after %.0fs; re-issuing what is still pending", limit)
                break
            session.pump(0.2)
            items, session.inbox = session.inbox, []
            for item in items:
                try:
                    obj = decode(item.message.body, content_type=item.message.content_type,
                                 content_encoding=item.message.content_encoding, max_bytes=max_bytes)  # fmt: skip
                    if item.kind == "results" and obj.get("kind") == "links":
                        out.links += 1  # the resume re-reads the pending set from the store anyway
                    elif item.kind == "results":
                        pack = parse_results(obj, max_body_bytes=max_bytes)
                        for result in pack.results:
                            key = (result.serial, result.url_id)
                            if key in seen:
                                out.duplicates += 1
                                continue
                            seen.add(key)
                            writer.append(result)
                            out.results += 1
                        out.reports += len(pack.reports)
                        last_result = monotonic()
                    elif item.kind == "heartbeat":
                        hb = parse_heartbeat(obj)
                        out.heartbeats[hb.node] = hb
                        heard_at[hb.node] = monotonic()
                    else:
                        out.submits.append(parse_submit(obj))
                except BadMessage as exc:
                    session.dead_letter(item, str(exc))
            if items:
                session.ack_through(items[-1].message)
            now = monotonic()
            if now - start < hb_timeout + 0.5 or not session.connected:
                continue  # give every live node the chance to be heard
            if _quiet(session, settings, out, heard_at, now=now, last_result=last_result, hb_timeout=hb_timeout,
                      wire=wire):  # fmt: skip
                break
    finally:
        writer.close()
    out.waited_s = round(monotonic() - start, 3)
    log.info("recovery: journaled %d results of the previous dispatcher's batches in %.1fs (%d duplicates)",
             out.results, out.waited_s, out.duplicates)  # fmt: skip
    return out


def _quiet(
    session: BrokerSession,
    settings: Settings,
    out: Recovered,
    heard_at: dict[str, float],
    *,
    now: float,
    last_result: float,
    hb_timeout: float,
    wire: str,
) -> bool:
    period = settings.dispatch.heartbeat_s
    if now - last_result < period + 0.2:
        return False
    shared = settings.dispatch.shards > 1  # the nodes work for the shard's peers too
    live = [node for node, at in heard_at.items() if now - at < hb_timeout]
    for node in live:
        # The node's latest word must postdate the last result and say it holds nothing of ours.
        if heard_at[node] < last_result or holds_ours(out.heartbeats[node], wire, shared=shared):
            return False
        if shared:
            continue  # its queue holds the peers' batches too (ours are refused by the serial check)
        waiting = session.ready_count(topology.fetch_queue(node))
        if waiting is None or waiting > 0:
            return False
    ready = session.ready_count(topology.results_queue(settings.fleet, wire))
    return ready == 0


def holds_ours(hb: NodeHeartbeat, wire: str, *, shared: bool) -> bool:
    """Whether a node's heartbeat says it runs a batch of the recovering dispatcher: any batch at all for
    the only dispatcher of its service, one named ``wire`` for a shard among peers."""
    if not shared:
        return hb.active > 0
    return any(service == wire for service, _serial, _fetcher in hb.held)
