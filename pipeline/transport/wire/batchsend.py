"""A fetch batch as a Celery task message, built without Celery, and published by kombu or pika.

Celery's own ``send_task`` (the baseline of ``crawlfleet bench amqp``) goes through routing, option
merging, ``saferepr`` of the whole batch for ``argsrepr``, signals, then kombu's serializer. For one task
name with one argument shape that was most of the dispatcher's publishing CPU (see docs/bench/amqp.md).
``TaskMessage`` is the same Celery message protocol 2 that ``send_task`` makes
(``celery.app.amqp.AMQP.as_task_v2``): the same headers (``task``, ``id``, ``expires``, ``root_id``,
...), properties (``correlation_id``, JSON, UTF-8, persistent) and body ``[args, kwargs, embed]``, so
an unchanged Celery worker runs it, and ``taskmsg.check_task_message`` accepts it. ``argsrepr`` is a
short summary instead of a repr of the batch (Celery only logs it).

``BatchEncoder`` keeps the parts that do not change between batches of one crawl (the scope and sink
JSON, the origin) already serialized, so a message costs one ``json.dumps`` of the batch itself.
Publishing: ``publish_kombu`` on a kombu Producer (the session's, in confirm mode) or
``publish_pika`` on a pika channel (``pika_session.PikaSession``). Both route like ``send_task`` with a
``Queue``: the default exchange, routing key = the node's queue name (the dispatcher declares the queue
when the node comes up).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fetchers.records import Batch
from pipeline.transport.wire import topology
from pipeline.transport.wire.messages import CONTENT_TYPE

_EMBED = '{"callbacks":null,"errbacks":null,"chain":null,"chord":null}'


@dataclass(slots=True)
class TaskMessage:
    """One Celery protocol-2 message: body bytes, AMQP headers and the properties Celery sets."""

    body: bytes
    headers: dict[str, Any]
    task_id: str
    routing_key: str  # the node's queue name, on the default exchange
    content_type: str = CONTENT_TYPE
    content_encoding: str = "utf-8"
    delivery_mode: int = 2  # persistent, as Celery sends to a durable queue


class BatchEncoder:
    """Builds ``TaskMessage`` s for one crawl: ``fetch_batch(batch_json, incarnation=, scope=, sink=)``."""

    def __init__(
        self,
        *,
        scope_json: dict[str, Any] | None,
        sink_json: dict[str, Any] | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._scope = _dumps(scope_json)
        self._sink = "" if not sink_json else ',"sink":' + _dumps(sink_json)
        self._origin = f"gen{os.getpid()}@{socket.gethostname()}"
        self._wall = wall

    def encode(self, batch: Batch, *, node: str, incarnation: str | None, expires_s: float | None) -> TaskMessage:
        task_id = f"{batch.service}-{batch.serial}"
        body = (f'[[{_dumps(batch.to_json())}],{{"incarnation":{_dumps(incarnation)},"scope":{self._scope}'
                f'{self._sink}}},{_EMBED}]')  # fmt: skip
        expires = None
        if expires_s and expires_s > 0:
            expires = datetime.fromtimestamp(self._wall() + expires_s, tz=UTC).isoformat()
        headers: dict[str, Any] = {
            "lang": "py", "task": topology.TASK_NAME, "id": task_id, "shadow": None, "eta": None,
            "expires": expires, "group": None, "group_index": None, "retries": 0, "timelimit": [None, None],
            "root_id": task_id, "parent_id": None,
            "argsrepr": f"(<batch {batch.serial}: {len(batch.tasks)} URLs>,)",
            "kwargsrepr": f"{{'incarnation': {incarnation!r}}}", "origin": self._origin, "ignore_result": True,
            "replaced_task_nesting": 0, "stamped_headers": None, "stamps": {},
        }  # fmt: skip
        return TaskMessage(body.encode(), headers, task_id, topology.fetch_queue_name(node))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def publish_kombu(producer: Any, msg: TaskMessage) -> None:
    """Publish on a kombu ``Producer`` (raises on a broker error or a nack when its channel confirms)."""
    producer.publish(
        msg.body, exchange="", routing_key=msg.routing_key, headers=msg.headers, content_type=msg.content_type,
        content_encoding=msg.content_encoding, delivery_mode=msg.delivery_mode, correlation_id=msg.task_id,
        reply_to="", priority=0, retry=False,
    )  # fmt: skip


def pika_properties(msg: TaskMessage) -> Any:
    import pika  # the pika client is optional for kombu users

    return pika.BasicProperties(
        content_type=msg.content_type, content_encoding=msg.content_encoding, headers=msg.headers,
        delivery_mode=msg.delivery_mode, priority=0, correlation_id=msg.task_id, reply_to="",
    )  # fmt: skip


def publish_pika(channel: Any, msg: TaskMessage) -> None:
    """Publish on a pika ``BlockingChannel`` (in confirm mode it returns once the broker has confirmed,
    and raises ``pika.exceptions.NackError`` or a connection error otherwise)."""
    channel.basic_publish("", msg.routing_key, msg.body, pika_properties(msg))
