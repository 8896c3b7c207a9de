"""Task messages from ``batchsend`` (no Celery on the sending side) are run by a real Celery worker.

A real ``crawlfleet worker`` process on the testbed, the dispatcher's real session (``BrokerSession``
or ``PikaSession``) listening for its heartbeats and replies, in the test session's private vhost.
Batches are published by that session (``publish_kombu`` on BrokerSession's confirming producer,
``PikaSession.publish_task``) and by ``publish_pika`` on a confirming pika BlockingChannel; each must come back as results for exactly its URLs (judged also from the testbed's access
log) and a report; the node stores the pages through the sink it is given. A batch whose ``expires`` has passed is discarded by the worker unrun, as Celery
does with ``send_task(expires=...)``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pika
import pytest

from fetchers.records import Batch, UrlTask
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.settings import FleetSettings
from pipeline.transport.wire.batchsend import BatchEncoder, publish_kombu, publish_pika
from pipeline.transport.wire.messages import decode, parse_heartbeat, parse_results
from pipeline.transport.wire.pika_session import PikaSession
from pipeline.transport.wire.session import BrokerSession
from pipeline.transport.wire.sink import SinkSpec
from pipeline.urls import fingerprint
from tests.fixtures.rabbitmq import fetch_counts, key

pytestmark = [pytest.mark.integration]


def _drain(session: BrokerSession, *, until: Any, timeout_s: float = 90.0) -> dict[str, list[Any]]:
    """Pump the session, sorting what arrives, until ``until(seen)`` holds."""
    seen: dict[str, list[Any]] = {"heartbeat": [], "results": [], "reports": []}
    deadline = time.monotonic() + timeout_s
    while not until(seen):
        assert time.monotonic() < deadline, f"timed out; seen {({k: len(v) for k, v in seen.items()})}"
        session.pump(0.2)
        items, session.inbox = session.inbox, []
        for item in items:
            obj = decode(item.message.body, content_type=item.message.content_type,
                         content_encoding=item.message.content_encoding, max_bytes=64 << 20)  # fmt: skip
            if item.kind == "heartbeat":
                seen["heartbeat"].append(parse_heartbeat(obj))
            elif item.kind == "results":
                pack = parse_results(obj, max_body_bytes=64 << 20)
                seen["results"] += pack.results
                seen["reports"] += pack.reports
        if items:
            session.ack_through(items[-1].message)
    return seen


@pytest.mark.parametrize("client", ["kombu", "pika"])
def test_worker_runs_batches_published_without_celery(client: str, rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    with TestbedProcess(4, 12, seed=5, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, heartbeat_s=0.5)
        node = f.start_worker(1, slots=1)  # one slot: the worker takes its queue in order
        kind = BrokerSession if client == "kombu" else PikaSession
        session = kind(FleetSettings(broker_url=rabbitmq), service=f.service, heartbeat_ttl_s=5.0)
        assert session.connect()
        session.declare_fetch_queue(node)
        hb = _drain(session, until=lambda s: s["heartbeat"])["heartbeat"][0]
        assert hb.node == node

        urls = list(tb.seeds)[:3]
        # The node stores the pages itself (a sink is required); the reply carries no bodies.
        sink = SinkSpec(f"sqlite:{tmp_path / 'node.db'}", str(tmp_path / "segments"), "", False).to_json()
        encoder = BatchEncoder(scope_json=None, sink_json=sink)
        expired_encoder = BatchEncoder(scope_json=None, sink_json=sink, wall=lambda: time.time() - 3600)

        def batch(serial: int, batch_urls: list[str]) -> Batch:
            return Batch(serial=serial, fetcher_id=f"{node}#0", service=f.service, issued_at=time.time(),
                         tasks=[UrlTask(u, fingerprint(u), 0) for u in batch_urls])  # fmt: skip

        expired = batch(1, urls[2:3])
        by_kombu, by_pika = batch(2, urls[0:1]), batch(3, urls[1:2])

        def send(b: Batch, enc: BatchEncoder) -> None:
            msg = enc.encode(b, node=node, incarnation=hb.incarnation, expires_s=60.0)
            if isinstance(session, PikaSession):
                session.publish_task(msg, serial=b.serial)  # confirmed in a later pump
            else:
                assert session.producer is not None
                publish_kombu(session.producer, msg)

        send(expired, expired_encoder)
        send(by_kombu, encoder)
        conn = pika.BlockingConnection(pika.URLParameters(rabbitmq))
        try:
            channel = conn.channel()
            channel.confirm_delivery()
            publish_pika(channel, encoder.encode(by_pika, node=node, incarnation=hb.incarnation, expires_s=None))
        finally:
            conn.close()

        seen = _drain(session, until=lambda s: {r.serial for r in s["reports"]} >= {2, 3})
        if isinstance(session, PikaSession):
            assert session.awaiting_confirms == 0 and session.take_unconfirmed() == []
        session.close()
        assert {r.serial for r in seen["reports"]} == {2, 3}  # the expired batch never ran
        got = {(r.serial, r.url) for r in seen["results"]}
        assert got == {(2, urls[0]), (3, urls[1])}
        counts = fetch_counts(tb)
        assert counts[key(urls[0])] == 1 and counts[key(urls[1])] == 1
        assert counts[key(urls[2])] == 0
        assert f"Discarding revoked task: crawlfleet.fetch_batch[{f.service}-1]" in f.log_tail(f"worker-{node}.log", 50_000)
