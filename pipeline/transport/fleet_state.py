"""What the fleet dispatcher keeps about each node and each batch it has out, and its counters."""

from __future__ import annotations

from dataclasses import dataclass, field

from fetchers.records import Batch


@dataclass(slots=True)
class Node:
    name: str
    incarnation: str
    vfids: list[str]
    last_seen: float
    active: int = 0
    dead: bool = False


@dataclass(slots=True)
class Issued:
    batch: Batch
    node: str
    vfid: str
    received: set[int] = field(default_factory=set)


@dataclass(slots=True)
class FleetCounters:
    batches_sent: int = 0
    batch_bytes: int = 0
    results_messages: int = 0
    results_bytes: int = 0
    heartbeats: int = 0
    heartbeat_bytes: int = 0
    duplicate_results: int = 0
    late_reports: int = 0
    expired_batches: int = 0
    purged_messages: int = 0
    dead_lettered: int = 0
    resends: int = 0
