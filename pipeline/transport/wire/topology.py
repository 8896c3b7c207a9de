"""Broker topology for fleet mode: every exchange and queue name, and how each is declared.

One place, so that every declarer (Celery worker, dispatcher, client) uses identical arguments;
RabbitMQ refuses a re-declaration with different arguments (PRECONDITION_FAILED).

- ``fetch.<node>``: one durable queue per fetch node on the direct exchange ``crawlfleet.fetch``
  (S1: the master picks the slave; here it routes to that slave's queue). Celery task messages.
- ``crawlfleet.results.<service>``: durable; FetchResult packs and batch reports for one service
  (S1: results go to the client's receiving endpoint). Direct exchange ``settings.fleet.results_exchange``.
- ``crawlfleet.submit.<service>``: durable; seed URLs from ``crawlfleet submit``.
- ``settings.fleet.heartbeat_exchange``: fanout; every dispatcher binds its own exclusive queue.
- ``crawlfleet.dead``: fanout dead-letter exchange and its durable queue. Every queue above names it
  as ``x-dead-letter-exchange``, so a message rejected with ``requeue=False`` lands there (the
  reason is logged by whoever rejected it; RabbitMQ adds an ``x-death`` header with the source queue).
  Consumers that see a bad message themselves copy it there with ``x-crawlfleet-reason`` and
  ``x-crawlfleet-source`` headers instead (``amqp.dead_letter``), so the reason travels with it.
"""

from __future__ import annotations

import re
import uuid

from kombu import Exchange, Queue

from pipeline.settings import FleetSettings

DEAD_EXCHANGE = "crawlfleet.dead"
DEAD_QUEUE = "crawlfleet.dead"
FETCH_EXCHANGE = "crawlfleet.fetch"
SUBMIT_EXCHANGE = "crawlfleet.submit"
FETCH_PREFIX = "fetch."
TASK_NAME = "crawlfleet.fetch_batch"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def check_name(name: str, *, what: str) -> str:
    """Node and service names become queue names: letters, digits, '-', '_' (max 64)."""
    if not _NAME.match(name):
        raise ValueError(f"bad {what} name {name!r}: use letters, digits, '-' and '_' (max 64)")
    return name


def _dead_letter_args() -> dict[str, str]:
    return {"x-dead-letter-exchange": DEAD_EXCHANGE}


def dead_exchange() -> Exchange:
    return Exchange(DEAD_EXCHANGE, "fanout", durable=True)


def dead_queue() -> Queue:
    return Queue(DEAD_QUEUE, dead_exchange(), routing_key="", durable=True)


def fetch_queue_name(node: str) -> str:
    return FETCH_PREFIX + check_name(node, what="node")


def fetch_queue(node_or_queue: str) -> Queue:
    """The durable task queue of one fetch node (accepts ``node`` or ``fetch.node``)."""
    name = node_or_queue if node_or_queue.startswith(FETCH_PREFIX) else fetch_queue_name(node_or_queue)
    check_name(name[len(FETCH_PREFIX) :], what="node")
    return Queue(
        name,
        Exchange(FETCH_EXCHANGE, "direct", durable=True),
        routing_key=name,
        durable=True,
        queue_arguments=_dead_letter_args(),
    )


def results_queue_name(service: str) -> str:
    return "crawlfleet.results." + check_name(service, what="service")


def results_exchange(fleet: FleetSettings) -> Exchange:
    return Exchange(fleet.results_exchange, "direct", durable=True)


def results_queue(fleet: FleetSettings, service: str) -> Queue:
    return Queue(
        results_queue_name(service),
        results_exchange(fleet),
        routing_key=service,
        durable=True,
        queue_arguments=_dead_letter_args(),
    )


def submit_exchange() -> Exchange:
    return Exchange(SUBMIT_EXCHANGE, "direct", durable=True)


def submit_queue(service: str) -> Queue:
    return Queue(
        "crawlfleet.submit." + check_name(service, what="service"),
        submit_exchange(),
        routing_key=service,
        durable=True,
        queue_arguments=_dead_letter_args(),
    )


def heartbeat_exchange(fleet: FleetSettings) -> Exchange:
    # Not durable: heartbeats are only worth anything while fresh.
    return Exchange(fleet.heartbeat_exchange, "fanout", durable=False)


def heartbeat_queue(fleet: FleetSettings, *, service: str, ttl_s: float) -> Queue:
    """A private queue for one dispatcher; messages older than ``ttl_s`` are discarded unread."""
    name = f"crawlfleet.heartbeats.{check_name(service, what='service')}.{uuid.uuid4().hex[:12]}"
    # No x-dead-letter-exchange here: expired heartbeats are noise, not bad messages. A malformed
    # heartbeat is copied to the dead-letter exchange explicitly by the consumer (amqp.dead_letter).
    args = {"x-message-ttl": max(1000, int(ttl_s * 1000))}
    return Queue(
        name,
        heartbeat_exchange(fleet),
        routing_key="",
        durable=False,
        exclusive=True,
        auto_delete=True,
        queue_arguments=args,
    )
