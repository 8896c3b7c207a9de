"""Dispatcher shards on the wire: each shard's name, its queues, and S5's blocks of hosts.

- A shard of a sharded service (``dispatch.shards`` > 1) speaks under its own *wire name*
  ``SERVICE-shardI``: its batches carry it, so a node's replies (routed by the batch's service), its
  serial checks and its segments' names go to that shard alone. Its results queue is
  ``crawlfleet.results.SERVICE-shardI``. Submits stay on the service's own queue (any shard takes one).
  With one shard the wire name is the service's: nothing changes.
- The service's **remote queue** (S5's second buffer) is ``crawlfleet.blocks.SERVICE``, durable, on the
  direct exchange ``crawlfleet.blocks``. A message is one **block**: whole hosts a shard gave up, each with
  the generation of its transit record (``pipeline.storage.hostowners``) and its pending count, as
  zlib-compressed JSON (S5: the surplus as one large-granularity request), signed by the fleet key like a
  links report.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

from kombu import Exchange, Queue

from pipeline.transport.wire import topology

BLOCK_EXCHANGE = "crawlfleet.blocks"
BLOCK_CONTENT_TYPE = "application/x-crawlfleet-block"
MAX_BLOCK_HOSTS = 100_000


def wire_name(service: str, shard: int, shards: int) -> str:
    """The name shard ``shard`` of ``service`` speaks under (the service's own with one shard)."""
    return service if shards <= 1 else topology.check_name(f"{service}-shard{shard}", what="service")


def shard_of_segment(segment_key: str, service: str, shards: int) -> int | None:
    """The shard whose batch wrote a segment (``NODE/WIRE-SERIAL-...``), or None when it names another."""
    name = segment_key.rpartition("/")[2]
    prefix = f"{service}-shard"
    if not name.startswith(prefix):
        return None
    digits, dash, _ = name[len(prefix) :].partition("-")
    if not dash or not digits.isdigit() or int(digits) >= shards:
        return None
    return int(digits)


def block_exchange() -> Exchange:
    return Exchange(BLOCK_EXCHANGE, "direct", durable=True)


def block_queue(service: str) -> Queue:
    return Queue("crawlfleet.blocks." + topology.check_name(service, what="service"), block_exchange(),
                 routing_key=service, durable=True)  # fmt: skip


@dataclass(frozen=True, slots=True)
class BlockHost:
    host: str
    gen: int  # of the host's transit record: a block whose record moved on is stale for that host
    pending: int


@dataclass(frozen=True, slots=True)
class Block:
    """Hosts one shard pushed at once."""

    service: str
    pushed_by: int
    hosts: tuple[BlockHost, ...]

    @property
    def urls(self) -> int:
        return sum(h.pending for h in self.hosts)

    def encode(self) -> bytes:
        obj = {"service": self.service, "from": self.pushed_by, "hosts": [[h.host, h.gen, h.pending] for h in self.hosts]}
        return zlib.compress(json.dumps(obj, separators=(",", ":")).encode(), 6)

    @classmethod
    def decode(cls, body: bytes, *, max_bytes: int) -> Block:
        """The block in ``body``; ValueError naming what is wrong with a body that is not one."""
        try:
            inflate = zlib.decompressobj()
            raw = inflate.decompress(body, max_bytes)
            if inflate.unconsumed_tail:
                raise ValueError(f"more than {max_bytes} bytes inflated")
            if not inflate.eof:
                raise ValueError("truncated")
            obj = json.loads(raw)
            hosts = tuple(BlockHost(str(h), int(g), max(0, int(p))) for h, g, p in obj["hosts"])
            if len(hosts) > MAX_BLOCK_HOSTS or not all(0 < len(h.host) <= 300 for h in hosts):
                raise ValueError("too many hosts, or a bad host name")
            return cls(str(obj["service"]), int(obj["from"]), hosts)
        except (zlib.error, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a block of hosts: {exc}") from exc
