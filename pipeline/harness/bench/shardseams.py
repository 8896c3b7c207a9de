"""In-memory fakes of the two seams where dispatcher shards talk to shared services, for ``bench dispatch
--shards`` (simulated: no HBase, no RabbitMQ; what they cost on the wire is not in these figures).

- **The store's coordination records** (``MemoryMeta``): the keys shards share through the crawl's store
  (HBase in a fleet) -- host owners ``own:``, shard leases ``lease:``, shard states ``shardstate:`` -- held
  in one dict with a sorted key list (a prefix scan is a range, as on HBase) and compare-and-set as
  ``Store.swap_meta`` defines it. ``SharedMetaStore`` is a real SQLite store (each shard's pending URLs,
  serials and other meta, as the one-dispatcher bench keeps them) whose coordination keys go to the shared
  ``MemoryMeta``; ``MetaView`` is the same records for the lease keeper's thread. Each counts its own
  reads, writes, swaps and scans: the store traffic a shard adds, to price at the store's round trip.
- **The remote queue and the links a shard sends on** (``MemorySide``): ``SideChannel`` with the broker
  replaced by a list. A block is still encoded, compressed and signed as for the broker, and decoded and
  checked when pulled; only the publish and the get are gone.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.settings import FleetSettings
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.wire.msgauth import signed_headers
from pipeline.transport.wire.replies import LinksReport
from pipeline.transport.wire.shardwire import Block
from pipeline.transport.wire.sidechannel import SHARDS_SIGNER, SideChannel

SHARED_PREFIXES = ("own:", "lease:", "shardstate:")  # what shards share through the store


@dataclass(slots=True)
class MetaOps:
    """Store calls on the coordination records: reads, writes, compare-and-sets, prefix scans."""

    get: int = 0
    put: int = 0
    swap: int = 0
    scan: int = 0

    def total(self) -> int:
        return self.get + self.put + self.swap + self.scan

    def minus(self, other: MetaOps) -> MetaOps:
        return MetaOps(self.get - other.get, self.put - other.put, self.swap - other.swap, self.scan - other.scan)

    def copy(self) -> MetaOps:
        return MetaOps(self.get, self.put, self.swap, self.scan)


class MemoryMeta:
    """The shared records: a dict, its keys kept sorted for prefix scans, one lock (the lease keepers'
    threads write too)."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._keys: list[str] = []
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        return self._values.get(key)

    def _set(self, key: str, value: str) -> None:
        if key not in self._values:
            bisect.insort(self._keys, key)
        self._values[key] = value

    def put(self, key: str, value: str) -> None:
        with self._lock:
            self._set(key, value)

    def swap(self, key: str, expected: str | None, new: str) -> bool:
        with self._lock:
            if self._values.get(key) != expected:
                return False
            self._set(key, new)
            return True

    def scan(self, prefix: str) -> list[tuple[str, str]]:
        with self._lock:
            i = bisect.bisect_left(self._keys, prefix)
            out = []
            while i < len(self._keys) and self._keys[i].startswith(prefix):
                out.append((self._keys[i], self._values[self._keys[i]]))
                i += 1
            return out

    def delete(self, keys: Sequence[str]) -> None:
        with self._lock:
            for k in keys:
                if self._values.pop(k, None) is not None:
                    del self._keys[bisect.bisect_left(self._keys, k)]


def shared(key: str) -> bool:
    return key.startswith(SHARED_PREFIXES)


class SharedMetaStore(SqliteStore):
    """A shard's store: SQLite, but the coordination records live in ``meta``, shared with its peers."""

    def __init__(self, path: Path, meta: MemoryMeta) -> None:
        self.shared_meta = meta
        self.ops = MetaOps()
        super().__init__(path)

    def get_meta(self, key: str) -> str | None:
        if not shared(key):
            return super().get_meta(key)
        self.ops.get += 1
        return self.shared_meta.get(key)

    def put_meta(self, key: str, value: str) -> None:
        if not shared(key):
            return super().put_meta(key, value)
        self.ops.put += 1
        self.shared_meta.put(key, value)
        return None

    def swap_meta(self, key: str, expected: str | None, new: str) -> bool:
        if not shared(key):
            return super().swap_meta(key, expected, new)
        self.ops.swap += 1
        return self.shared_meta.swap(key, expected, new)

    def scan_meta(self, prefix: str) -> Iterator[tuple[str, str]]:
        if not shared(prefix):
            return super().scan_meta(prefix)
        self.ops.scan += 1
        return iter(self.shared_meta.scan(prefix))

    def delete_meta(self, keys: Sequence[str]) -> None:
        super().delete_meta([k for k in keys if not shared(k)])
        self.shared_meta.delete([k for k in keys if shared(k)])


@dataclass(slots=True)
class MetaView:
    """The coordination records alone, as the lease keeper's thread opens the store (``Store``'s meta
    methods only; closing it closes nothing)."""

    meta: MemoryMeta
    ops: MetaOps = field(default_factory=MetaOps)

    def get_meta(self, key: str) -> str | None:
        self.ops.get += 1
        return self.meta.get(key)

    def put_meta(self, key: str, value: str) -> None:
        self.ops.put += 1
        self.meta.put(key, value)

    def swap_meta(self, key: str, expected: str | None, new: str) -> bool:
        self.ops.swap += 1
        return self.meta.swap(key, expected, new)

    def scan_meta(self, prefix: str) -> Iterator[tuple[str, str]]:
        self.ops.scan += 1
        return iter(self.meta.scan(prefix))

    def close(self) -> None:
        return None


@dataclass(slots=True)
class RemoteQueue:
    """The service's remote queue: each message a block's body and headers, oldest first."""

    messages: list[tuple[bytes, dict[str, Any]]] = field(default_factory=list)
    forwarded: list[tuple[str, LinksReport]] = field(default_factory=list)


class MemorySide(SideChannel):
    """``SideChannel`` over a ``RemoteQueue``: the block's encoding, signature and check are the real ones."""

    def __init__(self, fleet: FleetSettings, service: str, queue: RemoteQueue) -> None:
        super().__init__(fleet, service)
        self.queue = queue

    def push_block(self, block: Block) -> None:
        body = block.encode()
        self.queue.messages.append((body, signed_headers(self.keys, kind="block", node=SHARDS_SIGNER, body=body)))
        self.blocks_pushed += 1
        self.bytes_pushed += len(body)

    def pull_block(self, take: Callable[[Block], None]) -> bool:
        if not self.queue.messages:
            return False
        body, headers = self.queue.messages.pop(0)
        if self._forged(_Message(body, headers)) is None:
            take(Block.decode(body, max_bytes=self.fleet.max_message_bytes))
            self.blocks_pulled += 1
        return True

    def queued_blocks(self) -> int:
        return len(self.queue.messages)

    def send_links(self, wire: str, report: LinksReport) -> None:
        self.queue.forwarded.append((wire, report))
        self.forwarded += 1

    def drain(self, queue: Any, *, limit: int = 10_000) -> tuple[list[LinksReport], int]:
        return [], 0

    def close(self) -> None:
        return None


@dataclass(slots=True)
class _Message:
    body: bytes
    headers: dict[str, Any]

