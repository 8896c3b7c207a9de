"""The consumers ``crawlfleet bench amqp`` compares on the results queue, each pumped as the dispatcher's
``session.BrokerSession`` pumps: wait up to a timeout, take what else is there (up to ``max_messages``),
then ``take`` reads each message's body and content headers and acks the last one with ``multiple``.

- ``KombuConsumer``: py-amqp through kombu (Connection, Consumer, drain_events);
- ``PikaConsumer``: pika's BlockingConnection (basic_consume, process_data_events);
- ``SessionConsumer``: the dispatcher's session classes themselves (``session_consumers``);
- ``pika_reads``: pika's socket read size for one variant (4 KB as shipped, 256 KB as ``pika_session``
  sets it), restored afterwards.

Each consumer owns its connection (``close`` ends it). Used only by the bench; the broker is the caller's.

May import: anything in pipeline (bench room).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pika
from kombu import Consumer, Queue

from pipeline.settings import FleetSettings
from pipeline.transport.wire.amqp import connection


class KombuConsumer:
    """py-amqp through kombu, set up and pumped as session.BrokerSession does."""

    def __init__(self, url: str, queue: Queue, prefetch: int) -> None:
        self.conn = connection(url, confirm=True)
        self.conn.connect()
        ch = self.conn.channel()
        ch.basic_qos(0, prefetch, False)
        self.inbox: list[Any] = []
        Consumer(ch, queues=[queue(ch)], on_message=self.inbox.append, no_ack=False).consume()

    def pump(self, timeout: float, max_messages: int = 2000) -> None:
        try:
            self.conn.drain_events(timeout=timeout)
            while len(self.inbox) < max_messages:
                self.conn.drain_events(timeout=0)
        except TimeoutError:
            pass

    def take(self) -> int:
        items, self.inbox[:] = list(self.inbox), []
        for m in items:  # the dispatcher reads these of each message
            _ = (m.body, m.content_type, m.content_encoding)
        if items:
            items[-1].ack(multiple=True)
        return len(items)

    def close(self) -> None:
        self.conn.release()


class PikaConsumer:
    """pika's BlockingConnection, pumped the same way (wait, then take what is there, ack multiple)."""

    def __init__(self, url: str, queue: Queue, prefetch: int) -> None:
        self.conn = pika.BlockingConnection(pika.URLParameters(url))
        self.ch = self.conn.channel()
        self.ch.basic_qos(prefetch_count=prefetch)
        self.inbox: list[tuple[int, Any, bytes]] = []
        self.ch.basic_consume(queue.name, self._on_message, auto_ack=False)

    def _on_message(self, _ch: Any, method: Any, props: Any, body: bytes) -> None:
        self.inbox.append((method.delivery_tag, props, body))

    def pump(self, timeout: float, max_messages: int = 2000) -> None:
        self.conn.process_data_events(time_limit=timeout)
        before = -1
        while before != len(self.inbox) and len(self.inbox) < max_messages:
            before = len(self.inbox)
            self.conn.process_data_events(time_limit=0)

    def take(self) -> int:
        items, self.inbox[:] = list(self.inbox), []
        for _tag, props, body in items:
            _ = (body, props.content_type, props.content_encoding)
        if items:
            self.ch.basic_ack(items[-1][0], multiple=True)
        return len(items)

    def close(self) -> None:
        self.conn.close()


class SessionConsumer:
    """The dispatcher's session classes themselves (BrokerSession or PikaSession)."""

    def __init__(self, session: Any) -> None:
        self.s = session
        assert self.s.connect()

    def pump(self, timeout: float, max_messages: int = 2000) -> None:
        self.s.pump(timeout, max_messages=max_messages)

    def take(self) -> int:
        items, self.s.inbox = self.s.inbox, []
        for item in items:
            _ = (item.message.body, item.message.content_type, item.message.content_encoding)
        if items:
            self.s.ack_through(items[-1].message)
        return len(items)

    def close(self) -> None:
        self.s.close()


def session_consumers(url: str, prefetch: int, *, service: str) -> dict[str, Callable[[], Any]]:
    """The dispatcher's own session classes, by variant name, as consumers of ``service``'s results queue."""
    from pipeline.transport.wire.session import BrokerSession

    fleet = FleetSettings(broker_url=url)
    quiet: dict[str, Any] = {
        "heartbeat_ttl_s": 10.0,
        "prefetch": prefetch,
        "stall_s": 1e9,
        "probe_after_s": 1e9,
    }  # no probes
    out: dict[str, Callable[[], Any]] = {
        "session-kombu": lambda: SessionConsumer(BrokerSession(fleet, service=service, **quiet))
    }
    try:
        from pipeline.transport.wire.pika_session import PikaSession
    except ImportError:  # not written yet
        return out
    out["session-pika"] = lambda: SessionConsumer(PikaSession(fleet, service=service, **quiet))
    return out


PIKA_SHIPPED_READ = 4096  # pika 1.x's socket read size (``_AsyncTransportBase._MAX_RECV_BYTES``)
BIG_READ = 256 * 1024  # what pika_session sets


@contextlib.contextmanager
def pika_reads(size: int) -> Iterator[None]:
    """pika reads its socket 4 KB at a time and appends each read to its frame buffer (a copy of the whole
    buffer), so a 50 KB reply costs ~13 reads and ~13 copies. A class attribute: set for one variant."""
    from pika.adapters.utils.io_services_utils import _AsyncTransportBase as T

    saved = T._MAX_RECV_BYTES, T._MAX_CONSUME_BYTES
    T._MAX_RECV_BYTES, T._MAX_CONSUME_BYTES = size, max(size * 4, 100 * 1024)
    try:
        yield
    finally:
        T._MAX_RECV_BYTES, T._MAX_CONSUME_BYTES = saved


def read_size(name: str) -> int:
    """The socket read size a consume variant runs with (``pika``: as shipped; every other: ``BIG_READ``)."""
    return PIKA_SHIPPED_READ if name == "pika" else BIG_READ
