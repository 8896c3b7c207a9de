"""The dispatcher's broker session: one connection, consumers for results/heartbeats/submits, a producer.

Single-threaded by design (the dispatcher calls ``pump`` from its loop). Messages are collected into
``inbox`` in arrival order; the caller processes them, then ``ack_through`` the last one. Unusable
messages are copied to the dead-letter queue with their reason (``amqp.dead_letter``) by the caller.

When the broker goes away, ``pump`` notes the time and reconnects every ``retry_s``; messages that
were delivered but not acked come back from the broker (the caller drops duplicates by serial id).
``paused_s`` is the total time the dispatcher could not hear the fleet: the dispatcher's clock subtracts
it, so S1's "missed 2 heartbeat periods" is measured on time it could actually hear them. Three kinds of
deafness count, each of which would otherwise make every node look dead at once:

- the session was disconnected (a broker restart);
- the dispatcher was not listening: more than ``stall_s`` between two pumps, or a pump that overran its
  timeout by that much (the process was stopped, swapped out or busy; heartbeats waited in its socket);
- the broker was stalled with the connection open (SIGSTOP, a long GC, a disk alarm): when nothing at
  all has arrived for ``probe_after_s``, ``pump`` makes a blocking round trip to the broker (a passive
  declare); when it took longer than ``stall_s``, the whole silence since the last delivery is paused
  time. A fleet that is really dead on a live broker answers the probe at once, so its silence still
  counts and its batches still expire.

Each stall and each outage also earns a grace as long as itself, up to ``grace_s`` (the dispatcher
passes its whole liveness window): the nodes' heartbeats of the stall arrive only after it (after an
outage, only once the nodes have reconnected too), and must not be judged missing before they can.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message

from pipeline.settings import FleetSettings
from pipeline.transport.wire import topology
from pipeline.transport.wire.amqp import dead_letter, fleet_connection
from pipeline.transport.wire.messages import BadMessage, decode, parse_submit
from pipeline.transport.wire.msgauth import MessageKeys, check_node_message, require_signing
from pipeline.transport.wire.tls import check_broker, describe

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Inbound:
    kind: str  # "results" | "heartbeat" | "submit"
    message: Message


class BrokerSession:
    def __init__(
        self,
        fleet: FleetSettings,
        *,
        service: str,
        heartbeat_ttl_s: float,
        submit_service: str | None = None,
        prefetch: int = 512,
        retry_s: float = 0.5,
        on_connect: Callable[[], None] | None = None,
        stall_s: float = 0.5,
        probe_after_s: float = 1.0,
        grace_s: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fleet = fleet
        self.service = service  # results queue (a dispatcher shard's wire name, shardwire.wire_name)
        self.submit_service = submit_service or service  # submits: the service's own queue, whichever shard
        self.heartbeat_ttl_s = heartbeat_ttl_s
        self.prefetch = prefetch
        self.retry_s = retry_s
        self.on_connect = on_connect
        self._mono = monotonic
        self.stall_s = stall_s
        self.probe_after_s = probe_after_s
        self.grace_s = grace_s
        self.inbox: list[Inbound] = []
        self.conn: Connection | None = None
        self.producer: Producer | None = None
        self._consumer_channel: Any = None
        self._down_since: float | None = None
        self._last_attempt = -1e9
        self.paused_s = 0.0
        self.stalls = 0  # listening gaps and broker stalls counted into paused_s
        self._listened_at: float | None = None  # end of the last pump (None while disconnected)
        self._heard_at = 0.0  # last delivery or answered probe
        self.reconnects = 0
        self.dead_lettered = 0
        # Results and heartbeats must be signed by the node they speak for (wire/msgauth.py); forged ones
        # are dropped before the dispatcher sees them.
        check_broker(fleet)  # a refused URL or TLS setting fails here, not as an endless "unreachable"
        self.keys = MessageKeys.for_dispatcher(fleet)
        require_signing(fleet, self.keys)
        self.forged = 0

    # --- connection ------------------------------------------------------------------------------
    def paused_now(self) -> float:
        """Total deaf time so far, including the deafness going on now: an outage, or a stall longer than
        ``stall_s`` since the last pump (the caller blocked in a publish to a stalled broker reads the
        clock before the next pump could count the stall; the grace comes when it is counted)."""
        now = self._mono()
        ongoing = now - self._down_since if self._down_since is not None else 0.0
        if self._listened_at is not None and now - self._listened_at > self.stall_s:
            ongoing += now - self._listened_at
        return self.paused_s + ongoing

    @property
    def connected(self) -> bool:
        return self.conn is not None

    def connect(self) -> bool:
        """Try once (rate-limited to one attempt per ``retry_s``); True when connected."""
        if self.conn is not None:
            return True
        now = self._mono()
        if now - self._last_attempt < self.retry_s:
            return False
        self._last_attempt = now
        conn = fleet_connection(self.fleet, confirm=True)
        try:
            conn.connect()
            self._setup(conn)
        except Exception as exc:
            if self._down_since is None:
                log.warning("broker unreachable (%s); retrying every %.1fs", describe(exc, self.fleet), self.retry_s)
                self._down_since = now
            _close(conn)
            self.conn = self.producer = None
            return False
        if self._down_since is not None:
            outage = self._mono() - self._down_since
            # The nodes reconnect too, after us or not: they get their whole liveness window again.
            self.paused_s += outage + min(outage, self.grace_s)
            self.reconnects += 1
            log.info("broker session: reconnected after %.1fs", outage)
        self._down_since = None
        self._listened_at = self._heard_at = self._mono()
        if self.on_connect is not None:
            self.on_connect()
        return True

    def _setup(self, conn: Connection) -> None:
        consume = conn.channel()
        consume.basic_qos(0, self.prefetch, False)
        queues: list[tuple[str, Queue]] = [
            ("results", topology.results_queue(self.fleet, self.service)),
            ("heartbeat", topology.heartbeat_queue(self.fleet, service=self.service, ttl_s=self.heartbeat_ttl_s)),
            ("submit", topology.submit_queue(self.submit_service)),
        ]
        topology.dead_queue()(consume).declare()
        for kind, queue in queues:
            bound = queue(consume)
            bound.declare()
            Consumer(consume, queues=[bound], on_message=self._collector(kind), no_ack=False).consume()
        self.conn, self._consumer_channel = conn, consume
        self.producer = Producer(conn.channel())

    def _collector(self, kind: str) -> Callable[[Message], None]:
        def collect(message: Message) -> None:
            if self.forgery(kind, message) is not None:
                try:
                    message.reject(requeue=False)  # results: to crawlfleet.dead (the queue's DLX)
                except Exception as exc:
                    self.lost(exc)
                return
            self.inbox.append(Inbound(kind, message))

        return collect

    def forgery(self, kind: str, message: Any) -> str | None:
        """Why a results or heartbeat message is not the signed word of its node (logged, counted), or
        None to let it in. Submits are not signed (a client's seeds go through the crawl's scope)."""
        if kind not in ("results", "heartbeat"):
            return None
        why = check_node_message(self.keys, kind=kind, message=message, max_bytes=self.fleet.max_message_bytes)
        if why is not None:
            self.forged += 1
            log.warning("dropping a %s message that is not its node's: %s", kind, why)
        return why

    def lost(self, exc: BaseException) -> None:
        """Mark the session down after a broker error seen by the caller (e.g. a failed publish)."""
        if self.conn is None:
            return
        log.warning("broker session lost: %s: %s", type(exc).__name__, exc)
        _close(self.conn)
        self.conn = self.producer = self._consumer_channel = None
        self.inbox.clear()  # unacked deliveries of a dead channel come back from the broker
        self._down_since = self._mono()
        self._listened_at = None  # the outage is paused time already

    # --- consuming -------------------------------------------------------------------------------
    def pump(self, timeout: float, *, max_messages: int = 2000) -> None:
        """Wait up to ``timeout`` for messages, then take whatever else is already there."""
        if not self.connect():
            time.sleep(min(timeout, self.retry_s))
            return
        assert self.conn is not None
        self.note_deafness()
        start, before = self._mono(), len(self.inbox)
        try:
            self.conn.drain_events(timeout=timeout)
            while len(self.inbox) < max_messages:
                self.conn.drain_events(timeout=0)
        except TimeoutError:
            pass
        except Exception as exc:
            self.lost(exc)
            return
        now = self._mono()
        self._pause(now - start - timeout)  # stopped inside the pump itself
        if len(self.inbox) > before:
            self._heard_at = now
        elif now - self._heard_at >= self.probe_after_s:
            self._probe()
        self._listened_at = self._mono()

    def note_deafness(self) -> None:
        """Count the time since the last pump as paused if it is a stall (see the module docstring).
        The dispatcher calls this before judging liveness too: a process stopped between its pump and
        its tick must not find every node silent for the length of the stop."""
        if self._listened_at is None:
            return
        now = self._mono()
        self._pause(now - self._listened_at)
        self._listened_at = now

    def _pause(self, gap: float) -> None:
        if gap > self.stall_s:
            self._stall(gap)

    def _stall(self, deaf_s: float) -> None:
        # Plus a grace as long as the stall, up to ``grace_s``: what the nodes sent during it (or could
        # not send: their publishes were blocked too, and queued heartbeats may have outlived their TTL)
        # comes in only now, so every node gets its whole liveness window again.
        self.paused_s += deaf_s + min(deaf_s, self.grace_s)
        self.stalls += 1
        log.warning("could not hear the fleet for %.2fs (broker stalled or this process stopped): liveness "
                    "paused for it and a %.2fs grace", deaf_s, min(deaf_s, self.grace_s))  # fmt: skip

    def _probe(self) -> None:
        """A blocking round trip: the broker's answer proves it could have delivered heartbeats."""
        start = self._mono()
        self.ready_count(topology.submit_queue(self.submit_service))
        now = self._mono()
        if self.conn is not None:  # a probe that failed has marked the session down: paused already
            if now - start > self.stall_s:
                # The broker stopped before we noticed: the silence that led to the probe was part of
                # the stall too.
                self._stall(now - self._heard_at)
            self._heard_at = now

    def ack_through(self, message: Message) -> None:
        """Ack every delivery up to and including ``message`` (they are all processed)."""
        try:
            message.ack(multiple=True)
        except Exception as exc:
            self.lost(exc)

    def dead_letter(self, item: Inbound, reason: str) -> None:
        """Copy a message to the dead-letter queue with ``reason``; ``ack_through`` acks the original."""
        self.dead_lettered += 1
        assert self.producer is not None
        source = (item.message.delivery_info or {}).get("routing_key") or item.kind
        try:
            dead_letter(self.producer, item.message, reason=reason, source=f"{item.kind}:{source}")
        except Exception as exc:
            self.lost(exc)

    def wait_for_submits(self, *, max_bytes: int, stop: Callable[[], bool]) -> list[str]:
        """Before a crawl exists: the URLs of the first ``submit`` message(s). Other messages are acked
        unread (heartbeats before a crawl are moot; no results can be due)."""
        while not stop():
            self.pump(0.5)
            items, self.inbox = self.inbox, []
            urls: list[str] = []
            for item in items:
                if item.kind != "submit":
                    continue
                msg = item.message
                try:
                    obj = decode(msg.body, content_type=msg.content_type, content_encoding=msg.content_encoding,
                                 max_bytes=max_bytes)  # fmt: skip
                    urls += parse_submit(obj)[1]
                except BadMessage as exc:
                    self.dead_letter(item, str(exc))
            if items:
                self.ack_through(items[-1].message)
            if urls:
                return urls
        return []

    # --- queue management ------------------------------------------------------------------------
    def declare_fetch_queue(self, node: str) -> None:
        self._queue_op(lambda ch: topology.fetch_queue(node)(ch).declare())

    def purge_fetch_queue(self, node: str) -> int:
        """Drop the batches waiting in ``fetch.<node>`` (their serials were expired and re-queued)."""
        out: list[int] = []
        self._queue_op(lambda ch: out.append(topology.fetch_queue(node)(ch).purge() or 0))
        return out[0] if out else 0

    def ready_count(self, queue: Queue) -> int | None:
        """Messages ready in ``queue`` (not counting unacked ones), or None if the broker is away."""
        out: list[int] = []

        def op(ch: Any) -> None:
            _, count, _ = ch.queue_declare(queue=queue.name, passive=True)
            out.append(int(count))

        self._queue_op(op)
        return out[0] if out else None

    def _queue_op(self, op: Callable[[Any], Any]) -> None:
        if self.conn is None:
            return
        try:
            ch = self.conn.channel()  # a private channel: a passive-declare failure closes only it
            try:
                op(ch)
            finally:
                ch.close()
        except Exception as exc:
            if isinstance(exc, tuple(self.conn.connection_errors)):
                self.lost(exc)
            else:
                log.warning("queue operation failed: %s", exc)

    def close(self) -> None:
        if self.conn is not None:
            _close(self.conn)
        self.conn = self.producer = None


def _close(conn: Connection) -> None:
    try:
        conn.release()
    except Exception:  # already broken
        log.debug("closing a broken connection", exc_info=True)
