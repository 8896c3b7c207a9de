"""What the fleet dispatcher keeps about each node and each batch it has out, its counters and its summary."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fetchers.records import Batch
from pipeline.dispatch.quotas import quota_line

__all__ = ["FleetCounters", "Issued", "Node", "fleet_summary", "quota_line"]


@dataclass(slots=True)
class Node:
    name: str
    incarnation: str
    vfids: list[str]
    last_seen: float
    active: int = 0
    dead: bool = False
    p: float = 0.0  # S1: download rate of its last heartbeat (URLs/s)
    q: int = 0  # S1: free download slots of its last heartbeat
    successes: int = 0
    failures: int = 0


EXPIRED_KEPT = 100_000  # serials of batches expired here, remembered to know their late replies (inbox.py)


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
    serial_checks: int = 0  # S1 serial-id checks the nodes asked and the responder answered
    # Where the dispatcher's fixed CPU goes (bench fleet): turns of its loop, and the dispatch rounds
    # it ran (woken by a message or a tick, or retried when work may free: dispatcher_tick._retry_after)
    # and how many issued nothing.
    loop_turns: int = 0
    dispatch_rounds: int = 0
    empty_rounds: int = 0


def fleet_summary(core: Mapping[str, Any], elapsed: float, counters: FleetCounters, *, nodes: list[str],
                  reconnects: int, stalls: int, paused_s: float, interrupted: bool, quota: str = "",
                  node_heartbeats: Mapping[str, Mapping[str, Any]] | None = None,
                  link_lag: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The dispatcher's summary.json: the crawl core's summary, its rate, and the fleet's counters."""
    out = dict(core)
    if quota:
        out["quota"] = quota
    out["elapsed_s"] = round(elapsed, 3)
    fetched = out.get("pages_fetched", 0)
    out["pages_per_s"] = round(fetched / elapsed, 1) if elapsed > 0 else 0.0
    out["fleet"] = dict(dataclasses.asdict(counters), reconnects=reconnects, stalls=stalls, paused_s=round(paused_s, 3),
                        nodes=nodes, interrupted=interrupted,
                        node_heartbeats={k: dict(v) for k, v in (node_heartbeats or {}).items()},
                        link_lag=dict(link_lag or {}))  # fmt: skip
    return out
