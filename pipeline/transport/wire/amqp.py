"""AMQP edges of fleet mode (kombu over py-amqp): the worker's outbox and the dead-letter helper.

``Outbox`` is one thread with its own connection in publisher-confirm mode. It publishes each batch's
one reply (``put_text``; replies.py) to the service's results queue in the order given, and sends the
node's heartbeat on the fanout exchange every period. ``put_text`` returns an event that is set once
the broker has confirmed the reply: the Celery task waits for it before returning, so a task message
is acked (acks_late) only when its reply is safe.

While the broker is away the outbox keeps everything it has not had confirmed and retries every
``retry_s``; heartbeats are not queued (a stale heartbeat means nothing). A message the broker
nacks or a connection lost mid-publish is published again: duplicates are possible, losses are not,
and the dispatcher drops duplicates by serial id and the store's exactly-once rule.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kombu import Connection, Producer
from kombu.message import Message

from pipeline.settings import FleetSettings
from pipeline.transport.wire import tls, topology
from pipeline.transport.wire.messages import Encoded, NodeHeartbeat, encode, wrap
from pipeline.transport.wire.msgauth import MessageKeys, signed_headers

log = logging.getLogger(__name__)


def connection(url: str, *, confirm: bool = False, heartbeat: float = 0, ssl: Any = None) -> Connection:
    """A kombu connection; ``confirm`` makes every publish wait for the broker's ack; ``ssl``: py-amqp's
    TLS options (``tls.kombu_ssl``)."""
    options: dict[str, Any] = {"confirm_publish": True} if confirm else {}
    extra: dict[str, Any] = {"ssl": ssl} if ssl else {}
    return Connection(url, heartbeat=heartbeat, transport_options=options, connect_timeout=5, **extra)


def fleet_connection(fleet: FleetSettings, *, confirm: bool = False) -> Connection:
    """A kombu connection to the fleet's broker as the settings say: TLS for amqps:// (verified both
    ways), plain AMQP only to loopback, the password from its file (``tls.py``; raises
    ``BrokerPolicyError`` for a URL it refuses)."""
    tls.check_broker(fleet)
    return connection(tls.broker_url(fleet), confirm=confirm, ssl=tls.kombu_ssl(fleet))


def dead_letter(producer: Producer, message: Message, *, reason: str, source: str) -> None:
    """Copy ``message`` to the dead-letter queue with its reason in the headers (the caller acks it).

    Used by consumers that find a message unusable (not JSON, wrong schema, oversized). The reason
    is also logged here, once, so "why did this land in crawlfleet.dead" is answered in both places.
    """
    log.warning("dead-lettering a message from %s: %s", source, reason)
    headers = dict(message.headers or {})
    headers.update({"x-crawlfleet-reason": reason[:1000], "x-crawlfleet-source": source})
    producer.publish(
        message.body,
        exchange=topology.dead_exchange(),
        routing_key=source,
        headers=headers,
        content_type=message.content_type or "application/octet-stream",
        content_encoding=message.content_encoding or "binary",
        delivery_mode=2,
        declare=[topology.dead_queue()],
        retry=False,
    )


@dataclass(slots=True)
class OutboxStats:
    messages: int = 0
    bytes: int = 0
    reports: int = 0
    heartbeats: int = 0
    republished: int = 0
    reconnects: int = 0


@dataclass(slots=True)
class _Pending:
    service: str
    encoded: Encoded
    events: list[threading.Event] = field(default_factory=list)


class Outbox:
    """The publishing thread of one worker process. Thread-safe ``put_*``; see the module docstring."""

    def __init__(
        self,
        fleet: FleetSettings,
        *,
        node: str,
        incarnation: str,
        heartbeat_s: float,
        heartbeat: Callable[[], NodeHeartbeat],
        on_beat: Callable[[], None] | None = None,
        compress: bool = False,
        retry_s: float = 0.5,
    ) -> None:
        self.fleet = fleet
        self.node, self.incarnation = node, incarnation
        self.heartbeat_s = heartbeat_s
        self._heartbeat = heartbeat
        self._on_beat = on_beat  # after each heartbeat the broker confirmed (the worker's lease, runtime.py)
        self.retry_s, self.compress = retry_s, compress
        self.stats = OutboxStats()
        self._in: queue.SimpleQueue[tuple[str, str, Any]] = queue.SimpleQueue()
        self._pending: collections.deque[_Pending] = collections.deque()
        self._conn: Connection | None = None
        self._producer: Producer | None = None
        self._declared: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"outbox-{node}", daemon=True)
        self._next_heartbeat = 0.0
        self._down_since: float | None = None
        self._last_attempt = 0.0
        self._keys = MessageKeys.for_node(fleet, node)  # signs replies and heartbeats (wire/msgauth.py)
        self._declare_results = True  # off once the broker refuses it (a node's own user: rabbit-users.sh)

    # --- API (any thread) ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def put_text(self, service: str, text: str) -> threading.Event:
        """Publish a message serialised by the caller (a batch's one reply, replies.py) after everything
        queued before it for ``service``; the event is set once the broker has confirmed it."""
        done = threading.Event()
        self._in.put(("text", service, (text, done)))
        return done

    def heartbeat_now(self) -> None:
        """Send a heartbeat at the next chance (e.g. right after start-up)."""
        self._in.put(("heartbeat", "", None))

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def close(self, *, timeout: float = 5.0) -> None:
        """Publish what is queued (within ``timeout``) and stop."""
        self._in.put(("stop", "", None))
        self._thread.join(timeout)
        self._stop.set()

    # --- the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        stopping = False
        while True:
            timeout = self._wait_time()
            try:
                kind, service, payload = self._in.get(timeout=timeout)
                stopping = self._take(kind, service, payload) or stopping
                while True:  # take everything already queued before publishing
                    kind, service, payload = self._in.get_nowait()
                    stopping = self._take(kind, service, payload) or stopping
            except queue.Empty:
                pass
            self._publish_pending()
            self._maybe_heartbeat()
            if stopping and (not self._pending or self._stop.is_set()):
                break
            if stopping and self._conn is None:
                time.sleep(self.retry_s)
        self._disconnect()

    def _wait_time(self) -> float:
        now = time.monotonic()
        waits = [max(0.0, self._next_heartbeat - now)]
        if self._pending:
            waits.append(self.retry_s)
        return max(0.001, min(waits))

    def _take(self, kind: str, service: str, payload: Any) -> bool:
        if kind == "stop":
            return True
        if kind == "heartbeat":
            self._next_heartbeat = 0.0
            return False
        text, done = payload  # "text": a batch's reply
        self.stats.reports += 1
        self._queue(service, text, [done])
        return False

    def _queue(self, service: str, text: str, events: list[threading.Event]) -> None:
        self._pending.append(_Pending(service, wrap(text.encode(), compress=self.compress), list(events)))

    def _publish_pending(self) -> None:
        while self._pending:
            item = self._pending[0]
            if not self._send(item.service, item.encoded, persistent=True):
                return
            self._pending.popleft()
            self.stats.messages += 1
            self.stats.bytes += len(item.encoded.body)
            for ev in item.events:
                ev.set()

    def _maybe_heartbeat(self) -> None:
        now = time.monotonic()
        if now < self._next_heartbeat:
            return
        self._next_heartbeat = now + self.heartbeat_s
        try:
            hb = self._heartbeat()
        except Exception:  # a stats bug must not stop the heartbeat thread
            log.exception("heartbeat source failed")
            return
        if self._send("", encode(hb.to_json()), persistent=False, heartbeat=True):
            self.stats.heartbeats += 1
            if self._on_beat is not None:
                self._on_beat()

    def _send(self, service: str, enc: Encoded, *, persistent: bool, heartbeat: bool = False) -> bool:
        """Publish one message; False (and disconnected) if the broker is away or refused it."""
        producer = self._ensure_producer()
        if producer is None:
            return False
        try:
            if heartbeat:
                exchange, key = topology.heartbeat_exchange(self.fleet), ""
            else:
                exchange, key = topology.results_exchange(self.fleet), service
                if service not in self._declared and self._declare_results:
                    # Declare the queue too, so results are kept even before the dispatcher first starts.
                    self._declare_results_queue(producer, service)
                    if self._producer is None:  # refused: reconnected without it
                        return False
                self._declared.add(service)
            headers = signed_headers(self._keys, kind="heartbeat" if heartbeat else "results", node=self.node,
                                     body=enc.body)  # fmt: skip
            producer.publish(
                enc.body, exchange=exchange, routing_key=key, content_type=enc.content_type,
                content_encoding=enc.content_encoding, delivery_mode=2 if persistent else 1, retry=False,
                headers=headers,
            )  # fmt: skip
            return True
        except Exception as exc:  # connection, channel or nack: all mean "not confirmed, send again"
            log.warning("outbox: publish failed (%s: %s); will retry", type(exc).__name__, exc)
            if not heartbeat:
                self.stats.republished += 1
            self._disconnect()
            return False

    def _declare_results_queue(self, producer: Producer, service: str) -> None:
        """Declare the results queue; a node user without configure rights on it (scripts/rabbit-users.sh)
        is refused, which closes the channel: then stop declaring and reconnect (the dispatcher declares
        it before it issues a batch, so its replies are routed all the same)."""
        from amqp.exceptions import AccessRefused

        try:
            topology.results_queue(self.fleet, service).declare(channel=producer.channel)
        except AccessRefused:
            log.info("outbox: this user may not declare the results queue; the dispatcher's declaration is used")
            self._declare_results = False
            self._disconnect()
            self._down_since = None  # not an outage: reconnect at once

    def _ensure_producer(self) -> Producer | None:
        if self._producer is not None:
            return self._producer
        now = time.monotonic()
        if self._down_since is not None and now - self._last_attempt < self.retry_s:
            return None
        try:
            conn = fleet_connection(self.fleet, confirm=True)
        except tls.BrokerPolicyError as exc:  # a setting, not an outage: say so, keep retrying slowly
            log.error("outbox: %s", exc)
            self._down_since, self._last_attempt = self._down_since or now, now
            return None
        try:
            conn.connect()
            channel = conn.channel()
            topology.heartbeat_exchange(self.fleet).declare(channel=channel)
            topology.results_exchange(self.fleet).declare(channel=channel)
            self._producer = Producer(channel)
        except Exception as exc:
            if self._down_since is None:
                log.warning("outbox: broker unreachable (%s); retrying every %.1fs", tls.describe(exc, self.fleet), self.retry_s)
                self._down_since = now
            self._last_attempt = now
            _close_quietly(conn)
            return None
        if self._down_since is not None:
            self.stats.reconnects += 1
            log.info("outbox: reconnected after %.1fs", now - self._down_since)
        self._conn, self._down_since = conn, None
        self._declared.clear()
        return self._producer

    def _disconnect(self) -> None:
        if self._conn is not None:
            _close_quietly(self._conn)
        self._conn, self._producer = None, None
        if self._down_since is None:
            self._down_since = self._last_attempt = time.monotonic()


def _close_quietly(conn: Connection) -> None:
    try:
        conn.release()
    except Exception:  # already broken; nothing more to do
        log.debug("closing a broken connection", exc_info=True)
