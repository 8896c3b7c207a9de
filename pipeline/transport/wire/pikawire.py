"""pika's side of the wire for ``pika_session``: connection parameters read from the fleet's kombu-style
broker URL, the delivery the dispatcher reads, one hand-driven turn of pika's event loop, and pika's
socket read size.

- ``connection_parameters``: ``fleet.broker_url`` is written for kombu, where ``amqp://h:5672//`` means
  the vhost ``/``; pika would read that as the vhost ``""`` (refused by the broker). The URL is read
  by kombu's parser, with kombu's defaults (guest/guest, port 5672, vhost ``/``; 5671 for amqps), so
  both clients reach the same vhost from the same setting; ``ssl_options`` (``tls.pika_ssl``) for amqps.
- ``RECV_BYTES``: pika's transport reads the socket 4 KB at a time (a class attribute, the same in pika
  1.2-1.4) and re-copies its frame buffer on each read, so a 50 KB reply costs ~13 reads and ~13
  copies; raised process-wide on import (docs/bench/amqp.md: 0.69 -> 1.06 of kombu's consuming rate
  on 100-page replies). tests/unit/test_amqp_pika_accounting.py fails if a pika release drops it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pika
from kombu.utils.url import parse_url
from pika.adapters.utils.io_services_utils import _AsyncTransportBase

RECV_BYTES = 256 * 1024
if getattr(_AsyncTransportBase, "_MAX_RECV_BYTES", RECV_BYTES) < RECV_BYTES:
    _AsyncTransportBase._MAX_RECV_BYTES = RECV_BYTES
    _AsyncTransportBase._MAX_CONSUME_BYTES = max(_AsyncTransportBase._MAX_CONSUME_BYTES, 4 * RECV_BYTES)


def connection_parameters(url: str, *, name: str, ssl_options: Any = None) -> pika.ConnectionParameters:
    """pika parameters for the kombu-style ``url``; ``name`` shows in the broker's connection list.
    AMQP heartbeats off, as in the kombu session: a stopped dispatcher must not be disconnected for it."""
    parts = parse_url(url)
    if parts["transport"] not in ("amqp", "pyamqp", "amqps"):
        raise ValueError(f"the pika session speaks amqp:// and amqps://, not {parts['transport']}://")
    tls = parts["transport"] == "amqps"
    if tls and ssl_options is None:
        raise ValueError("amqps:// needs TLS options (tls.pika_ssl)")
    return pika.ConnectionParameters(
        host=parts["hostname"] or "localhost", port=parts["port"] or (5671 if tls else 5672),
        ssl_options=ssl_options if tls else None,
        virtual_host=parts["virtual_host"] or "/",
        credentials=pika.PlainCredentials(parts["userid"] or "guest", parts["password"] or "guest"),
        heartbeat=0, connection_attempts=1, socket_timeout=5,
        client_properties={"connection_name": name},
    )  # fmt: skip


class ChannelGone(Exception):
    """A private channel was closed by the broker (e.g. a passive declare of a missing queue)."""


@dataclass(slots=True)
class PikaMessage:
    """What the dispatcher reads of a delivery (the same names as kombu's Message)."""

    body: bytes
    content_type: str | None
    content_encoding: str | None
    headers: dict[str, Any] | None
    delivery_tag: int
    routing_key: str
    channel: Any  # acks go to this channel only (a re-opened one has new delivery tags)

    @property
    def delivery_info(self) -> dict[str, Any]:
        return {"routing_key": self.routing_key, "delivery_tag": self.delivery_tag}


def poll(conn: Any, timeout: float) -> None:
    """One turn of pika's loop: I/O ready within ``timeout`` (a timer bounds the wait), then due timers."""
    loop = conn.ioloop
    timer = loop.call_later(max(0.0, timeout), _noop)
    try:
        loop.poll()
        loop.process_timeouts()
    finally:
        loop.remove_timeout(timer)


def _noop() -> None:
    return None


def fleet_parameters(fleet: Any, *, name: str) -> pika.ConnectionParameters:
    """pika parameters for the fleet's broker as the settings say (``tls.py``: TLS for amqps://, plain
    AMQP only to loopback, the password from ``fleet.broker_password_file``). Every pika connection of
    the fleet should be made from these, not from ``pika.URLParameters(fleet.broker_url)``."""
    from pipeline.transport.wire import tls

    tls.check_broker(fleet)
    return connection_parameters(tls.broker_url(fleet), name=name, ssl_options=tls.pika_ssl(fleet))
