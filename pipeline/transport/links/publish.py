"""How ``crawlfleet links`` tells the dispatcher what a round did: a ``links`` message on the service's results
queue, over a confirmed channel, signed like every fleet message (``msgauth.links_headers``)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from pipeline.settings import Settings
from pipeline.transport.wire.replies import LinksReport

log = logging.getLogger(__name__)


def amqp_publisher(settings: Settings, service: str) -> Callable[[LinksReport], None]:
    """``publish(report)`` over a confirmed channel to the service's results queue (reconnecting); with
    dispatcher shards, to each shard's results queue the part ``routing.ShardRouter`` gives it."""
    send = _amqp_sender(settings)
    d = settings.dispatch
    if d.shards <= 1:
        return lambda report: send(service, report)
    from pipeline.storage.factory import from_settings
    from pipeline.storage.shardleases import timing
    from pipeline.transport.links.routing import ShardRouter
    from pipeline.transport.wire.shardwire import wire_name

    _, skew_s = timing(d.shard_heartbeat_s)
    router = ShardRouter(from_settings(settings.store, ""), service, d.shards, skew_s=skew_s)

    def publish(report: LinksReport) -> None:
        for shard, part in router.route(report).items():
            send(wire_name(service, shard, d.shards), part)

    return publish


def _amqp_sender(settings: Settings) -> Callable[[str, LinksReport], None]:
    """``send(routing_key, report)`` over one confirmed channel (reconnecting, bounded retries)."""
    from kombu import Producer

    from pipeline.transport.wire import topology
    from pipeline.transport.wire.amqp import fleet_connection
    from pipeline.transport.wire.messages import encode
    from pipeline.transport.wire.msgauth import links_headers
    from pipeline.transport.wire.tls import describe

    state: dict[str, Any] = {}

    def send(routing_key: str, report: LinksReport) -> None:
        enc = encode(report.to_json())
        for attempt in range(30):
            try:
                if "producer" not in state:
                    conn = fleet_connection(settings.fleet, confirm=True)  # TLS, password file (tls.py)
                    state["conn"], state["producer"] = conn, Producer(conn.channel())
                state["producer"].publish(
                    enc.body, exchange=topology.results_exchange(settings.fleet), routing_key=routing_key,
                    content_type=enc.content_type, content_encoding=enc.content_encoding, delivery_mode=2,
                    declare=[topology.results_queue(settings.fleet, routing_key)], retry=False,
                    headers=links_headers(settings.fleet, enc.body),  # signed: the dispatcher drops forgeries
                )  # fmt: skip
                return
            except Exception as exc:  # broker away: reconnect and try again, bounded
                log.warning("links: publish failed (%s: %s); retrying", type(exc).__name__, describe(exc, settings.fleet))
                conn = state.pop("conn", None)
                state.pop("producer", None)
                if conn is not None:
                    with contextlib.suppress(Exception):  # closing a broken connection
                        conn.release()
                time.sleep(min(5.0, 0.5 * (attempt + 1)))
        raise RuntimeError("links: the broker did not take the report in 30 attempts")

    return send
