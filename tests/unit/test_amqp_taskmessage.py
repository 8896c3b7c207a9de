"""``batchsend.BatchEncoder`` makes the message Celery's ``send_task`` makes (protocol 2), and the
worker's own pre-decode check accepts it. Pure: Celery builds its message without a broker."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from fetchers.records import Batch, UrlTask
from pipeline.settings import Settings
from pipeline.transport.node.celery_app import make_app
from pipeline.transport.wire import topology
from pipeline.transport.wire.batchsend import BatchEncoder, pika_properties
from pipeline.transport.wire.messages import BadMessage
from pipeline.transport.wire.taskmsg import check_task_message, parse_task_args

SCOPE = {"domains": ["a.test", "b.test"], "allow": [], "deny": [r"/slow$"]}
SINK = {"store": "sqlite:///tmp/x.db", "segments": "/tmp/segments", "warc": "", "keep_body": False}
NOW = 1_800_000_000.0


@dataclass
class Raw:
    body: bytes
    content_type: str | None
    content_encoding: str | None
    headers: dict[str, Any] | None


def _batch() -> Batch:
    tasks = [UrlTask(f"http://a.test/p{i}?q=\u00e9", 1000 + i, 2) for i in range(50)]
    return Batch(serial=42, fetcher_id="n1#0", tasks=tasks, service="svc", issued_at=NOW - 1)


def _celery(batch: Batch, *, sink: dict[str, Any] | None) -> Any:
    app = make_app(Settings())
    kwargs = {"incarnation": "inc-1", "scope": SCOPE, **({"sink": sink} if sink else {})}
    return app.amqp.as_task_v2(f"{batch.service}-{batch.serial}", topology.TASK_NAME, args=[batch.to_json()],
                               kwargs=kwargs, expires=60.0, ignore_result=True)  # fmt: skip


@pytest.mark.parametrize("sink", [None, SINK])
def test_same_message_as_celery_send_task(sink: dict[str, Any] | None) -> None:
    batch = _batch()
    ours = BatchEncoder(scope_json=SCOPE, sink_json=sink, wall=lambda: NOW).encode(
        batch, node="n1", incarnation="inc-1", expires_s=60.0)  # fmt: skip
    theirs = _celery(batch, sink=sink)
    assert set(ours.headers) == set(theirs.headers)
    for name in ("lang", "task", "id", "shadow", "eta", "group", "group_index", "retries", "timelimit",
                 "root_id", "parent_id", "ignore_result", "replaced_task_nesting", "stamped_headers", "stamps"):  # fmt: skip
        assert ours.headers[name] == theirs.headers[name], name
    assert datetime.fromisoformat(ours.headers["expires"]).timestamp() == NOW + 60.0
    assert datetime.fromisoformat(theirs.headers["expires"]).utcoffset() is not None
    assert datetime.fromisoformat(ours.headers["expires"]).utcoffset() == datetime.fromisoformat(
        theirs.headers["expires"]).utcoffset()  # fmt: skip
    assert json.loads(ours.body) == json.loads(json.dumps(theirs.body))
    assert ours.task_id == theirs.properties["correlation_id"]
    assert ours.routing_key == topology.fetch_queue_name("n1")


def test_worker_check_accepts_it_and_parses_the_batch_back() -> None:
    batch = _batch()
    msg = BatchEncoder(scope_json=SCOPE, sink_json=SINK).encode(batch, node="n1", incarnation=None, expires_s=None)
    check_task_message(Raw(msg.body, msg.content_type, msg.content_encoding, msg.headers), max_bytes=1 << 20)
    args, kwargs, _embed = json.loads(msg.body)
    back, incarnation, scope, sink = parse_task_args(args, kwargs)
    assert back == batch and incarnation is None and scope is not None and sink is not None
    assert msg.headers["expires"] is None
    with pytest.raises(BadMessage):
        check_task_message(Raw(msg.body, msg.content_type, msg.content_encoding, msg.headers), max_bytes=100)


def test_pika_properties_carry_celery_properties() -> None:
    msg = BatchEncoder(scope_json=None).encode(_batch(), node="n1", incarnation="i", expires_s=5.0)
    props = pika_properties(msg)
    assert (props.content_type, props.content_encoding, props.delivery_mode) == ("application/json", "utf-8", 2)
    assert props.correlation_id == msg.task_id and props.headers["task"] == topology.TASK_NAME
