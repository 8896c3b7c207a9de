"""The dispatcher's broker session on pika (``fleet.amqp_client = "pika"``): ``BrokerSession``'s contract.

Same public interface and the same accounting as ``session.BrokerSession`` (read its docstring): one
connection, consumers for results/heartbeats/submits collected into ``inbox``, ``ack_through``,
``dead_letter``, reconnects every ``retry_s``, and ``paused_s`` for the time the dispatcher could not
hear the fleet (an outage, a listening gap, a stalled broker found by the probe). The accounting is
inherited (``paused_now``, ``note_deafness``, the probe); only the wire is pika's.

Why pika here (docs/bench/amqp.md): pika's own event loop (``SelectConnection``, polled by ``pump``)
publishes with *pipelined* publisher confirms: ``publish_task`` returns at once and the broker's
ack arrives in a later pump, where kombu's ``confirm_publish`` waits a round trip per message. A
batch the broker nacks, or that was unconfirmed when the connection died, comes back from
``take_unconfirmed`` for the caller to send again (duplicates are possible, losses are not; nodes
drop duplicates by serial). A dead-letter copy is confirmed before ``dead_letter`` returns, so the
caller's ack of the original never overtakes it. wire/pikawire.py has the URL, the delivery and the
socket read size. Single-threaded
like BrokerSession: every callback runs inside ``pump`` (or a blocking queue op). ``make_session``,
``send_task`` and ``take_unconfirmed`` are the dispatcher's seam to either client.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import pika
from kombu import Queue
from kombu.message import Message

from pipeline.settings import FleetSettings
from pipeline.transport.wire import tls, topology
from pipeline.transport.wire.batchsend import TaskMessage, pika_properties, publish_kombu
from pipeline.transport.wire.msgauth import signed_headers
from pipeline.transport.wire.pikawire import ChannelGone, PikaMessage, connection_parameters, poll
from pipeline.transport.wire.session import BrokerSession, Inbound

log = logging.getLogger(__name__)

class PikaSession(BrokerSession):
    """See the module docstring. ``conn`` is a pika ``SelectConnection`` while connected."""

    conn: Any

    def __init__(self, fleet: FleetSettings, *, op_timeout_s: float = 10.0, **kwargs: Any) -> None:
        super().__init__(fleet, **kwargs)
        self.op_timeout_s = op_timeout_s  # for opening the connection; a probe waits as long as the broker
        self._consume_ch: Any = None
        self._publish_ch: Any = None
        self._closed: BaseException | None = None
        self._tag = 0  # delivery tags of the publishing channel
        self._awaiting: dict[int, int | None] = {}  # tag -> serial (None: a dead-letter copy)
        self._nacked: set[int] = set()
        self._unconfirmed: list[int] = []

    # --- connection ------------------------------------------------------------------------------
    def connect(self) -> bool:
        if self.conn is not None:
            return True
        now = self._mono()
        if now - self._last_attempt < self.retry_s:
            return False
        self._last_attempt = now
        try:
            self._open()
        except Exception as exc:
            if self._down_since is None:
                log.warning("broker unreachable (%s); retrying every %.1fs", tls.describe(exc, self.fleet), self.retry_s)
                self._down_since = now
            self._teardown()
            return False
        if self._down_since is not None:  # the same accounting as BrokerSession.connect
            outage = self._mono() - self._down_since
            self.paused_s += outage + min(outage, self.grace_s)
            self.reconnects += 1
            log.info("broker session (pika): reconnected after %.1fs", outage)
        self._down_since = None
        self._listened_at = self._heard_at = self._mono()
        if self.on_connect is not None:
            self.on_connect()
        return True

    def _open(self) -> None:
        tls.check_broker(self.fleet)
        params = connection_parameters(tls.broker_url(self.fleet), name=f"crawlfleet-dispatcher-{self.service}",
                                       ssl_options=tls.pika_ssl(self.fleet))  # fmt: skip
        opened: list[Any] = []
        self._closed = None
        self.conn = pika.SelectConnection(params, on_open_callback=opened.append, on_close_callback=self._on_closed,
                                          on_open_error_callback=self._on_closed)  # fmt: skip
        self.conn.ioloop.activate_poller()  # what ioloop.start() does; we poll it ourselves
        deadline = time.monotonic() + self.op_timeout_s
        self._wait(lambda: bool(opened), deadline=deadline)
        consume = self._channel(deadline=deadline)
        self._rpc(consume, lambda cb: consume.basic_qos(prefetch_count=self.prefetch, callback=cb), deadline=deadline)
        self._declare(consume, topology.dead_queue(), deadline=deadline)
        queues: list[tuple[str, Queue]] = [
            ("results", topology.results_queue(self.fleet, self.service)),
            ("heartbeat", topology.heartbeat_queue(self.fleet, service=self.service, ttl_s=self.heartbeat_ttl_s)),
            ("submit", topology.submit_queue(self.submit_service)),
        ]
        for kind, queue in queues:
            self._declare(consume, queue, deadline=deadline)
            self._rpc(consume, partial(_consume, consume, queue.name, self._collector_for(kind, consume)),
                      deadline=deadline)  # fmt: skip
        publish = self._channel(deadline=deadline)
        self._rpc(publish, lambda cb: publish.confirm_delivery(self._on_confirm, callback=cb), deadline=deadline)
        self._consume_ch, self._publish_ch = consume, publish

    def _collector_for(self, kind: str, channel: Any) -> Callable[..., None]:
        def collect(_ch: Any, method: Any, props: Any, body: bytes) -> None:
            msg = PikaMessage(body, props.content_type, props.content_encoding, props.headers,
                              method.delivery_tag, method.routing_key, channel)  # fmt: skip
            if self.forgery(kind, msg) is not None:  # not its node's word: dropped (results: to the DLX)
                channel.basic_reject(method.delivery_tag, requeue=False)
                return
            # self.inbox, not a list captured here: callers swap it (``items, s.inbox = s.inbox, []``).
            self.inbox.append(Inbound(kind, cast(Message, msg)))  # duck-typed: callers read the fields above

        return collect

    def _on_closed(self, _conn: Any, reason: BaseException | str) -> None:
        self._closed = reason if isinstance(reason, BaseException) else ConnectionError(reason)

    def _on_confirm(self, frame: Any) -> None:
        tag, multiple = frame.method.delivery_tag, frame.method.multiple
        nack = isinstance(frame.method, pika.spec.Basic.Nack)
        tags = [t for t in self._awaiting if t <= tag] if multiple else [tag]
        for t in tags:
            serial = self._awaiting.pop(t, None)
            if nack:
                self._nacked.add(t)
                if serial is not None:
                    self._unconfirmed.append(serial)

    def lost(self, exc: BaseException) -> None:
        if self.conn is None:
            return
        log.warning("broker session lost: %s: %s", type(exc).__name__, exc)
        self._teardown()
        self.inbox.clear()  # unacked deliveries of a dead channel come back from the broker
        self._down_since = self._mono()
        self._listened_at = None  # the outage is paused time already

    def _teardown(self) -> None:
        self._unconfirmed += [s for s in self._awaiting.values() if s is not None]
        self._awaiting.clear()
        self._nacked.clear()
        self._tag = 0
        conn, self.conn, self._consume_ch, self._publish_ch = self.conn, None, None, None
        if conn is None:
            return
        with contextlib.suppress(Exception):  # already broken: nothing to close politely
            if conn.is_open:
                conn.close()
                deadline = time.monotonic() + 1.0
                while not conn.is_closed and time.monotonic() < deadline:
                    poll(conn, 0.05)
        with contextlib.suppress(Exception):
            conn.ioloop.deactivate_poller()
            conn.ioloop.close()

    def close(self) -> None:
        if self.conn is not None and self._awaiting:
            with contextlib.suppress(Exception):  # let the last confirms in, briefly
                self._wait(lambda: not self._awaiting, deadline=time.monotonic() + 2.0)
        self._teardown()

    # --- waiting on the loop ---------------------------------------------------------------------
    def _check(self) -> None:
        if self._closed is not None or self.conn is None or self.conn.is_closed:
            raise ConnectionError(f"broker connection closed: {self._closed}")

    def _wait(self, done: Callable[[], bool], *, deadline: float | None, channel: Any = None) -> None:
        while not done():
            self._check()
            if channel is not None and channel.is_closed:
                raise ChannelGone(str(getattr(channel, "_closing_reason", "channel closed")))
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("the broker did not answer in time")
            poll(self.conn, 0.05)

    def _channel(self, *, deadline: float | None) -> Any:
        opened: list[Any] = []
        self.conn.channel(on_open_callback=opened.append)
        self._wait(lambda: bool(opened), deadline=deadline)
        return opened[0]

    def _rpc(self, channel: Any, start: Callable[[Callable[[Any], None]], Any], *, deadline: float | None) -> Any:
        """Start an asynchronous channel method and poll until its reply (or the channel/connection dies)."""
        box: list[Any] = []
        start(box.append)
        self._wait(lambda: bool(box), deadline=deadline, channel=channel)
        return box[0]

    def _declare(self, ch: Any, queue: Queue, *, deadline: float | None) -> None:
        """Declare ``queue`` as kombu's ``Queue.declare`` does: its exchange, the queue, the binding."""
        ex = queue.exchange
        if ex is not None and ex.name:
            self._rpc(ch, lambda cb: ch.exchange_declare(ex.name, ex.type, durable=ex.durable,
                                                         auto_delete=ex.auto_delete, callback=cb), deadline=deadline)  # fmt: skip
        self._rpc(ch, lambda cb: ch.queue_declare(queue.name, durable=queue.durable, exclusive=queue.exclusive,
                                                  auto_delete=queue.auto_delete, arguments=getattr(queue, "queue_arguments", None),
                                                  callback=cb), deadline=deadline)  # fmt: skip
        if ex is not None and ex.name:
            self._rpc(ch, lambda cb: ch.queue_bind(queue.name, ex.name, routing_key=queue.routing_key, callback=cb),
                      deadline=deadline)  # fmt: skip

    # --- consuming -------------------------------------------------------------------------------
    def pump(self, timeout: float, *, max_messages: int = 2000) -> None:
        """Wait up to ``timeout`` for messages, then take whatever else is already there (and send what
        ``publish_task`` and ``ack_through`` queued, take in confirms)."""
        if not self.connect():
            time.sleep(min(timeout, self.retry_s))
            return
        self.note_deafness()
        start, before = self._mono(), len(self.inbox)
        try:
            end = start + timeout
            poll(self.conn, timeout)
            while len(self.inbox) == before and (left := end - self._mono()) > 0:
                self._check()
                poll(self.conn, left)  # woken by a write or a confirm: keep waiting for a delivery
            seen = -1
            while seen != len(self.inbox) and len(self.inbox) < max_messages:
                seen = len(self.inbox)
                poll(self.conn, 0)
            self._check()
        except Exception as exc:
            self.lost(exc)
            return
        now = self._mono()  # from here on, BrokerSession.pump's accounting
        self._pause(now - start - timeout)
        if len(self.inbox) > before:
            self._heard_at = now
        elif now - self._heard_at >= self.probe_after_s:
            self._probe()
        self._listened_at = self._mono()

    def ack_through(self, message: Message) -> None:
        """Ack every delivery up to ``message`` (sent with the next pump); not one of a channel now gone."""
        msg = cast(PikaMessage, message)
        if self._consume_ch is None or msg.channel is not self._consume_ch:
            return
        try:
            self._consume_ch.basic_ack(msg.delivery_tag, multiple=True)
        except Exception as exc:
            self.lost(exc)

    def dead_letter(self, item: Inbound, reason: str) -> None:
        """Copy a message to the dead-letter queue with ``reason`` (confirmed before this returns)."""
        self.dead_lettered += 1
        msg = cast(PikaMessage, item.message)
        source = f"{item.kind}:{msg.routing_key or item.kind}"
        log.warning("dead-lettering a message from %s: %s", source, reason)
        headers = dict(msg.headers or {})
        headers.update({"x-crawlfleet-reason": reason[:1000], "x-crawlfleet-source": source})
        props = pika.BasicProperties(content_type=msg.content_type or "application/octet-stream",
                                     content_encoding=msg.content_encoding or "binary", headers=headers,
                                     delivery_mode=2)  # fmt: skip
        try:
            tag = self._publish(topology.DEAD_EXCHANGE, source, msg.body, props, serial=None)
            self._wait(lambda: tag not in self._awaiting, deadline=None)
            if tag in self._nacked:
                raise ConnectionError("the broker refused a dead-letter copy")
        except Exception as exc:
            self.lost(exc)

    # --- publishing ------------------------------------------------------------------------------
    def publish_task(self, msg: TaskMessage, *, serial: int) -> None:
        """Queue a task message (``batchsend``) to its node; sent with the next pump, confirmed later.
        Raises ConnectionError while disconnected; see ``take_unconfirmed``."""
        self._publish("", msg.routing_key, msg.body, pika_properties(msg), serial=serial)

    def take_unconfirmed(self) -> list[int]:
        """Serials whose task message the broker nacked or never confirmed before a disconnection."""
        out, self._unconfirmed = self._unconfirmed, []
        return out

    @property
    def awaiting_confirms(self) -> int:
        return len(self._awaiting)

    def _publish(self, exchange: str, key: str, body: bytes, props: Any, *, serial: int | None) -> int:
        if self._publish_ch is None:
            raise ConnectionError("broker session is down")
        self._publish_ch.basic_publish(exchange, key, body, props)
        self._tag += 1
        self._awaiting[self._tag] = serial
        return self._tag

    # --- queue management ------------------------------------------------------------------------
    def declare_fetch_queue(self, node: str) -> None:
        self._queue_op(lambda ch: self._declare(ch, topology.fetch_queue(node), deadline=None))

    def purge_fetch_queue(self, node: str) -> int:
        out: list[int] = []
        name = topology.fetch_queue_name(node)
        self._queue_op(lambda ch: out.append(int(self._rpc(
            ch, lambda cb: ch.queue_purge(name, callback=cb), deadline=None).method.message_count)))  # fmt: skip
        return out[0] if out else 0

    def ready_count(self, queue: Queue) -> int | None:
        out: list[int] = []
        self._queue_op(lambda ch: out.append(int(self._rpc(
            ch, lambda cb: ch.queue_declare(queue.name, passive=True, callback=cb), deadline=None).method.message_count)))  # fmt: skip
        return out[0] if out else None

    def _queue_op(self, op: Callable[[Any], Any]) -> None:
        if self.conn is None:
            return
        try:
            ch = self._channel(deadline=None)  # a private channel: a passive-declare failure closes only it
            try:
                op(ch)
            finally:
                if ch.is_open:
                    ch.close()
        except ChannelGone as exc:
            log.warning("queue operation failed: %s", exc)
        except Exception as exc:
            self.lost(exc)


# --- the seam the dispatcher uses, whichever client ``fleet.amqp_client`` names --------------------------
CLIENTS = ("kombu", "pika")


def make_session(client: str, fleet: FleetSettings, **kwargs: Any) -> BrokerSession:
    """A ``BrokerSession`` (kombu) or a ``PikaSession``, with BrokerSession's arguments."""
    if client not in CLIENTS:
        raise ValueError(f"fleet.amqp_client must be one of {', '.join(CLIENTS)}, got {client!r}")
    return PikaSession(fleet, **kwargs) if client == "pika" else BrokerSession(fleet, **kwargs)


def send_task(session: BrokerSession, msg: TaskMessage, *, serial: int) -> None:
    """Publish a ``batchsend`` task message on either session; raises while the session is down. kombu
    returns once the broker confirmed it; pika at once (see ``take_unconfirmed``). Signed for its node
    when the session holds the fleet key (wire/msgauth.py): the node refuses it otherwise."""
    node = msg.routing_key.removeprefix(topology.FETCH_PREFIX)
    msg.headers.update(signed_headers(session.keys, kind="batch", node=node, body=msg.body))
    if isinstance(session, PikaSession):
        session.publish_task(msg, serial=serial)
    elif session.producer is None:
        raise ConnectionError("broker session is down")
    else:
        publish_kombu(session.producer, msg)


def take_unconfirmed(session: BrokerSession) -> list[int]:
    """Serials to send again: nacked or unconfirmed at a disconnection (always empty for kombu, whose
    publish raises instead)."""
    return session.take_unconfirmed() if isinstance(session, PikaSession) else []


def _consume(channel: Any, queue: str, on_message: Callable[..., None], callback: Callable[[Any], None]) -> None:
    channel.basic_consume(queue, on_message, auto_ack=False, callback=callback)
