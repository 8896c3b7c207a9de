"""The Celery app of fleet mode: one worker per fetch node, consuming only its own ``fetch.<node>`` queue.

Run a node with ``crawlfleet worker --node NAME`` (it wraps ``celery -A pipeline.transport.node.celery_app
worker -Q fetch.NAME --pool threads``). Settings come from ``CRAWLFLEET_CONFIG`` (a TOML file) and
``CRAWLFLEET_*`` variables, read here at the process edge; ``CRAWLFLEET_NODE`` names the node.

Choices, each for a reason:
- JSON only (``accept_content=['json']``): a pickle from the network is code execution.
- ``task_acks_late`` + ``task_reject_on_worker_lost`` + prefetch 1: a batch is acked only after its
  results are confirmed by the broker; a killed worker's batch goes back to the broker.
- the *threads* pool: the fetch itself runs on one long-lived asyncio loop per process
  (``runtime.FetchRuntime``); the solo pool was measured at 1-2 tasks/s.
- every ``fetch.*`` queue is declared with the dead-letter exchange (``FleetQueues``), whoever
  declares it first, so rejected messages land in ``crawlfleet.dead``.
- ``FleetConsumer`` checks each task message before Celery decodes it (size, content type, JSON,
  batch schema; with a key, the dispatcher's signature for this node and no replay: wire/msgauth.py) and
  rejects a bad one to the dead-letter queue with a logged reason; it also reconnects faster than
  Celery's default 2 s, 4 s, 6 s ... back-off.
- The broker connection follows ``tls.py``: amqps:// with the CA and this node's client certificate,
  plain AMQP only to loopback, the password from its file.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from celery import Celery
from celery.app.amqp import AMQP, Queues
from celery.worker.consumer import Consumer
from celery.worker.state import maybe_shutdown, reserved_requests
from kombu import Queue
from kombu.message import Message

from pipeline.settings import Settings, load_settings
from pipeline.transport.wire import tls, topology
from pipeline.transport.wire.messages import BadMessage
from pipeline.transport.wire.msgauth import MessageKeys, check_batch, require_signing
from pipeline.transport.wire.signing import ReplayGuard
from pipeline.transport.wire.taskmsg import check_task_message

log = logging.getLogger(__name__)

RECONNECT_START_S = 0.5
RECONNECT_MAX_S = 2.0
SHUTDOWN_POLL_S = 0.25


def _noop() -> None:
    return None


class FleetQueues(Queues):
    """Missing ``fetch.*`` queues are created with the fleet's arguments (dead-letter exchange)."""

    def new_missing(self, name: str) -> Queue:
        if name.startswith(topology.FETCH_PREFIX):
            return topology.fetch_queue(name)
        return super().new_missing(name)


class FleetAMQP(AMQP):
    queues_cls = FleetQueues


class FleetConsumer(Consumer):
    """Celery's consumer with a pre-decode check of every task message and quicker reconnects."""

    def create_task_handler(self, *args: Any, **kwargs: Any) -> Any:
        inner = super().create_task_handler(*args, **kwargs)
        settings = current_settings()
        limit = settings.fleet.max_message_bytes
        node = node_name()
        keys = MessageKeys.for_node(settings.fleet, node)
        guard = ReplayGuard(max_age_s=settings.dispatch.lease_s)

        def on_task_received(message: Message) -> Any:
            try:
                check_task_message(message, max_bytes=limit)
            except BadMessage as exc:
                return reject(message, str(exc))
            why = check_batch(keys, guard, node=node, message=message, now=time.time())
            if why is not None:
                return reject(message, f"refused batch for node {node}: {why}")
            return inner(message)

        return on_task_received

    def register_with_event_loop(self, hub: Any) -> None:
        super().register_with_event_loop(hub)
        # The hub sleeps in poll() until its next timer (up to a minute with AMQP heartbeats), and a
        # signal does not wake it (PEP 475 resumes the poll): a short tick keeps SIGTERM prompt.
        hub.call_repeatedly(SHUTDOWN_POLL_S, _noop)

    def on_decode_error(self, message: Message, exc: Exception) -> None:
        reject(message, f"cannot decode: {exc}")

    def ensure_connected(self, conn: Any) -> Any:
        def on_error(exc: Exception, interval: float) -> None:
            log.warning("broker unreachable (%s); retrying in %.1fs", tls.describe(exc, current_settings().fleet), interval)

        conn = conn.ensure_connection(
            on_error,
            self.app.conf.broker_connection_max_retries,
            interval_start=RECONNECT_START_S,
            interval_step=RECONNECT_START_S,
            interval_max=RECONNECT_MAX_S,
            callback=maybe_shutdown,
        )
        self.first_connection_attempt = False
        self.broker_connection_retry_attempt = 0
        return conn


def reject(message: Message, reason: str) -> None:
    """Dead-letter a task message: reject without requeue (the queue's DLX catches it), reason logged."""
    source = (message.delivery_info or {}).get("routing_key", "?")
    log.warning("dead-lettering a task message from %s: %s", source, reason)
    try:
        message.reject(requeue=False)
    except Exception:  # the channel is gone: the broker re-delivers it and we decide again
        log.exception("could not reject message")


_settings: Settings | None = None


def current_settings() -> Settings:
    """Settings of this process, read once from ``CRAWLFLEET_CONFIG`` and ``CRAWLFLEET_*``."""
    global _settings
    if _settings is None:
        from pipeline.crawl.sitemapfeed import keep_sitemap_bodies

        # A node keeps robots.txt and sitemap bodies for the link job when the crawl reads sitemaps.
        _settings = keep_sitemap_bodies(load_settings(os.environ.get("CRAWLFLEET_CONFIG") or None))
    return _settings


def node_name() -> str:
    """This worker's node (``CRAWLFLEET_NODE``, set by ``crawlfleet worker``)."""
    return topology.check_name(os.environ.get("CRAWLFLEET_NODE", "default"), what="node")


def configure(app: Celery, settings: Settings) -> None:
    """Celery's settings for a fleet node. Raises ``tls.BrokerPolicyError`` for a broker URL the fleet
    refuses (plain AMQP off loopback, amqps:// without its CA) and for an unsigned node off loopback."""
    tls.check_broker(settings.fleet)
    require_signing(settings.fleet, MessageKeys.for_node(settings.fleet, node_name()))
    app.conf.update(
        broker_url=tls.broker_url(settings.fleet),
        broker_use_ssl=tls.kombu_ssl(settings.fleet) or False,
        broker_connection_retry_on_startup=True,
        broker_connection_retry=True,
        broker_connection_max_retries=None,  # a fleet node waits for its broker forever
        broker_transport_options={"confirm_publish": True},
        task_serializer="json",
        result_serializer="json",
        event_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # After a reconnect Celery lowers the prefetch count by the tasks still running and restores it
        # as their acks fail; we saw that leave a node's consumer stuck at a full window. Not needed
        # here: a re-delivered batch that is still running joins the running fetch (serial ids).
        worker_enable_prefetch_count_reduction=False,
        task_ignore_result=True,
        result_backend=None,
        task_default_queue=topology.fetch_queue_name("default"),
        task_default_exchange=topology.FETCH_EXCHANGE,
        task_default_routing_key=topology.fetch_queue_name("default"),
        task_create_missing_queues=True,
        task_send_sent_event=settings.fleet.task_events,  # Flower (CRAWLFLEET_FLEET_TASK_EVENTS=1)
        worker_send_task_events=settings.fleet.task_events,
        # Remote control (pidbox) lets any broker user who may publish to celery.pidbox shut a worker
        # down or change its queues; only Flower needs it, so it comes with task events.
        worker_enable_remote_control=settings.fleet.task_events,
        worker_consumer="pipeline.transport.node.celery_app:FleetConsumer",
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        # A long batch is normal; never kill it for time (the dispatcher's lease handles stuck ones).
        task_time_limit=None,
        task_soft_time_limit=None,
    )


def make_app(settings: Settings | None = None) -> Celery:
    app = Celery("crawlfleet", amqp=FleetAMQP, include=["pipeline.transport.node.tasks"], set_as_current=False)
    configure(app, settings or current_settings())
    return app


app = make_app()


def reserved_count() -> int:
    """Task messages this worker holds (received and not yet finished), for the heartbeat's ``active``."""
    return len(reserved_requests)
