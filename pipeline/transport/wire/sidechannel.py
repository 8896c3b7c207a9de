"""A dispatcher shard's second broker connection: the little traffic between shards, blocking and confirmed.

- ``push_block``: a block of hosts to the service's remote queue (``shardwire``), confirmed before it
  returns (the hosts' transit records are written before: a block never names a host its record does not
  show in transit);
- ``pull_block``: one block off the remote queue, handed to the caller and acked only when the caller has
  taken its hosts (a shard killed meanwhile leaves it to the broker, which delivers it again: the hosts
  already taken are then found no longer in transit, and skipped);
- ``queued_blocks``: how many blocks wait;
- ``send_links``: new pending URLs of hosts another shard owns, as a ``links`` report on that shard's
  results queue (signed as the link jobs sign theirs);
- ``drain``: the links reports waiting in a dead shard's results queue (its node replies are dropped:
  the nodes stored them), and how many messages there were.

The dispatcher's main session stays single-purpose (results, heartbeats, submits); this one is used at
heartbeat frequency. A broker error closes the connection and raises ``SideError``; the next call
reconnects.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from kombu import Connection, Producer, Queue

from pipeline.settings import FleetSettings
from pipeline.transport.wire import signing, topology
from pipeline.transport.wire.amqp import fleet_connection
from pipeline.transport.wire.messages import BadMessage, decode, encode
from pipeline.transport.wire.msgauth import (
    SIG_HEADER,
    MessageKeys,
    check_node_message,
    links_headers,
    signed_headers,
)
from pipeline.transport.wire.replies import LinksReport, parse_links
from pipeline.transport.wire.shardwire import BLOCK_CONTENT_TYPE, Block, block_exchange, block_queue

log = logging.getLogger(__name__)

SHARDS_SIGNER = ".shards"  # not a node name (topology.check_name): no node holds its derived key


class SideError(ConnectionError):
    """The broker did not take or give what was asked (the connection is closed; try again later)."""


class SideChannel:
    def __init__(self, fleet: FleetSettings, service: str) -> None:
        self.fleet = fleet
        self.service = service
        self.keys = MessageKeys.for_dispatcher(fleet)
        self._conn: Connection | None = None
        self._producer: Producer | None = None
        self.blocks_pushed = self.blocks_pulled = self.forwarded = 0
        self.bytes_pushed = 0

    def _open(self) -> tuple[Connection, Producer]:
        if self._conn is None or self._producer is None:
            conn = fleet_connection(self.fleet, confirm=True)
            conn.connect()
            self._conn, self._producer = conn, Producer(conn.channel())
            block_queue(self.service)(conn.default_channel).declare()
        return self._conn, self._producer

    def _call(self, what: str, fn: Callable[[Connection, Producer], Any]) -> Any:
        try:
            conn, producer = self._open()
            return fn(conn, producer)
        except Exception as exc:
            self.close()
            raise SideError(f"{what}: {type(exc).__name__}: {exc}") from exc

    # --- the remote queue --------------------------------------------------------------------------
    def push_block(self, block: Block) -> None:
        body = block.encode()
        headers = signed_headers(self.keys, kind="block", node=SHARDS_SIGNER, body=body)

        def publish(_conn: Connection, producer: Producer) -> None:
            producer.publish(body, exchange=block_exchange(), routing_key=self.service, headers=headers,
                             content_type=BLOCK_CONTENT_TYPE, content_encoding="binary", delivery_mode=2,
                             declare=[block_queue(self.service)], retry=False)  # fmt: skip

        self._call("push a block", publish)
        self.blocks_pushed += 1
        self.bytes_pushed += len(body)

    def pull_block(self, take: Callable[[Block], None]) -> bool:
        """Give one waiting block to ``take`` and ack it after; False when none waits. A message that is not
        a signed block is dropped (logged): it would come back for ever otherwise."""

        def get(conn: Connection, _producer: Producer) -> bool:
            msg = block_queue(self.service)(conn.default_channel).get(no_ack=False)
            if msg is None:
                return False
            why = self._forged(msg)
            if why is None:
                try:
                    block = Block.decode(msg.body, max_bytes=self.fleet.max_message_bytes)
                except ValueError as exc:
                    why = str(exc)
            if why is not None:
                log.warning("dropping a message of the remote queue: %s", why)
                msg.reject(requeue=False)
                return True
            take(block)
            msg.ack()
            self.blocks_pulled += 1
            return True

        return bool(self._call("pull a block", get))

    def queued_blocks(self) -> int:
        def count(conn: Connection, _producer: Producer) -> int:
            _, ready, _ = conn.default_channel.queue_declare(queue=block_queue(self.service).name, passive=True)
            return int(ready)

        return int(self._call("count blocks", count))

    def _forged(self, msg: Any) -> str | None:
        if not self.keys.signing:
            return None
        return signing.verify(self.keys.key_for(SHARDS_SIGNER), kind="block", node=SHARDS_SIGNER,
                              body=msg.body, signature=(msg.headers or {}).get(SIG_HEADER))  # fmt: skip

    # --- between shards ----------------------------------------------------------------------------
    def send_links(self, wire: str, report: LinksReport) -> None:
        """``report`` to the results queue of the shard speaking as ``wire``."""
        enc = encode(report.to_json())

        def publish(_conn: Connection, producer: Producer) -> None:
            producer.publish(enc.body, exchange=topology.results_exchange(self.fleet), routing_key=wire,
                             content_type=enc.content_type, content_encoding=enc.content_encoding, delivery_mode=2,
                             declare=[topology.results_queue(self.fleet, wire)], retry=False,
                             headers=links_headers(self.fleet, enc.body))  # fmt: skip

        self._call("forward links", publish)
        self.forwarded += 1

    def drain(self, queue: Queue, *, limit: int = 10_000) -> tuple[list[LinksReport], int]:
        """Take what waits in ``queue`` (a dead shard's results queue): its signed links reports, and the
        number of messages taken."""

        def take(conn: Connection, _producer: Producer) -> tuple[list[LinksReport], int]:
            bound = queue(conn.default_channel)
            bound.declare()
            reports, seen = [], 0
            while seen < limit:
                msg = bound.get(no_ack=False)
                if msg is None:
                    break
                seen += 1
                with contextlib.suppress(BadMessage):
                    if check_node_message(self.keys, kind="results", message=msg,
                                          max_bytes=self.fleet.max_message_bytes) is None:  # fmt: skip
                        obj = decode(msg.body, content_type=msg.content_type, content_encoding=msg.content_encoding,
                                     max_bytes=self.fleet.max_message_bytes)  # fmt: skip
                        if obj.get("kind") == "links":
                            reports.append(parse_links(obj))
                msg.ack()
            return reports, seen

        result: tuple[list[LinksReport], int] = self._call("drain a results queue", take)
        return result

    def close(self) -> None:
        conn, self._conn, self._producer = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.release()
