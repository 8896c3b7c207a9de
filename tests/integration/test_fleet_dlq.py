"""Bad messages on every fleet queue go to the dead-letter queue with a logged reason; nothing crashes.

Injected during a real fleet crawl: non-JSON, wrong schema, oversized and pickle-typed messages on a
worker's ``fetch.<node>`` queue, on the results queue, on the heartbeat exchange and on the submit
queue. The crawl must still reach its ground truth, every bad message must be in ``crawlfleet.dead``
(with ``x-crawlfleet-reason`` when the dispatcher rejected it, with RabbitMQ's ``x-death`` when a
worker did), and the reasons must be in the logs.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection, Producer

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.settings import FleetSettings
from pipeline.transport.wire import topology
from tests.fixtures.rabbitmq import MAX_DEPTH, check_store_exactly_once, check_truth

pytestmark = [pytest.mark.integration]

LIMIT = 1_000_000  # fleet.max_message_bytes for this test's processes


def _publish(conn: Connection, body: bytes, *, exchange: Any, key: str, ctype: str = "application/json",
             headers: dict[str, Any] | None = None) -> None:  # fmt: skip
    Producer(conn.channel()).publish(body, exchange=exchange, routing_key=key, content_type=ctype,
                                     content_encoding="utf-8", headers=headers or {}, retry=True)  # fmt: skip


def _drain_dead(url: str, token: str) -> list[Any]:
    out = []
    with Connection(url) as conn:
        queue = topology.dead_queue()(conn.channel())
        queue.declare()
        while True:
            msg = queue.get(no_ack=False)
            if msg is None:
                break
            if token.encode() in (msg.body if isinstance(msg.body, bytes) else str(msg.body).encode()):
                out.append(msg)
            msg.ack()
    return out


def test_bad_messages_are_dead_lettered_with_reasons(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    token = f"tok{uuid.uuid4().hex}"
    with TestbedProcess(8, 20, seed=9, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, host_delay=0.1,
                  extra_env={"CRAWLFLEET_FLEET_MAX_MESSAGE_BYTES": str(LIMIT)})  # fmt: skip
        node = f.start_worker(1)
        f.start_dispatcher()
        f.wait_event(lambda ev: ev["ev"] == "done")
        fleet_settings = FleetSettings()
        fetch_q = topology.fetch_queue(node)
        task_headers = {"task": topology.TASK_NAME, "id": f"bad-{token}", "lang": "py"}
        good_shape = json.dumps([[{"serial": "nope", "tag": token}], {}, {}]).encode()
        with Connection(rabbitmq) as conn:
            sends = [
                # (body, exchange, routing key, content type, headers)
                (f"not json {token}".encode(), fetch_q.exchange, fetch_q.routing_key, "application/json", task_headers),
                (good_shape, fetch_q.exchange, fetch_q.routing_key, "application/json", task_headers),
                (token.encode() + b"x" * (LIMIT + 10), fetch_q.exchange, fetch_q.routing_key, "application/json", task_headers),
                (f"pickle {token}".encode(), fetch_q.exchange, fetch_q.routing_key, "application/x-python-serialize", task_headers),
                (json.dumps({"tag": token}).encode(), fetch_q.exchange, fetch_q.routing_key, "application/json", {}),
                (f"{{broken {token}".encode(), topology.results_exchange(fleet_settings), f.service, "application/json", {}),
                (json.dumps({"v": 1, "kind": "results", "node": 7, "tag": token}).encode(),
                 topology.results_exchange(fleet_settings), f.service, "application/json", {}),
                (token.encode() + b"y" * (LIMIT + 10), topology.results_exchange(fleet_settings), f.service, "application/json", {}),
                (json.dumps({"v": 1, "kind": "heartbeat", "node": "x", "tag": token}).encode(),
                 topology.heartbeat_exchange(fleet_settings), "", "application/json", {}),
                (json.dumps({"v": 1, "kind": "submit", "urls": 3, "tag": token}).encode(),
                 topology.submit_exchange(), f.service, "application/json", {}),
            ]  # fmt: skip
            for body, exchange, key, ctype, headers in sends:
                _publish(conn, body, exchange=exchange, key=key, ctype=ctype, headers=headers)
        summary = f.wait_dispatcher()
        time.sleep(0.5)
        dead = _drain_dead(rabbitmq, token)
        # Every injected message is dead-lettered; a heartbeat may be copied once per dispatcher bound.
        assert len(dead) >= len(sends), [m.headers for m in dead]
        reasons = [str((m.headers or {}).get("x-crawlfleet-reason", "")) for m in dead]
        by_worker = [m for m in dead if "x-death" in (m.headers or {})]
        assert len(by_worker) == 5, [m.headers for m in dead]
        assert all(d["queue"] == fetch_q.name for m in by_worker for d in m.headers["x-death"])
        assert any(r.startswith("not JSON") for r in reasons)
        assert any(r.startswith("wrong schema") for r in reasons)
        assert any(r.startswith("oversized") for r in reasons)
        assert summary["fleet"]["dead_lettered"] >= 5
        worker_log = f.log_tail(f"worker-{node}.log", n=10**6)
        for needle in ("not JSON", "wrong schema", "oversized", "content_type", "not a crawlfleet.fetch_batch task"):
            assert needle in worker_log, needle
        dispatcher_log = f.log_tail("dispatcher.log", n=10**6)
        assert dispatcher_log.count("dead-lettering a message") >= 5
        assert f.workers[node].poll() is None, "the worker survived"
        truth = tb.truth(max_depth=MAX_DEPTH)
        check_truth(tb, truth, nodes=1)
        check_store_exactly_once(f.out, truth)
