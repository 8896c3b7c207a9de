"""How many nodes N dispatcher shards serve: the wall, from ``bench dispatch``'s medians. Pure arithmetic.

Each shard issues its share of the fleet's pages (a node's slots are split among the shards), but hears
every node's heartbeats and looks at every node when it chooses one. At ``n`` nodes of ``P`` pages/s,
``S`` shards and ``B`` pages per batch, one shard's CPU per second is, from its figures measured at the
sizes run (linear in n between them and past the largest, ``linear_at``; a cost per host, per URL
moved or per beat does not depend on n: its median over the sizes, ``flat_us``):

- **decision wall** (``decision_cpu``): its decisions and what a shard adds per page on that path,
  ``(n P / S) (a_S(n) / B + g h_new + m (push + pull))``: a_S the shard's decision (choice, next_batch,
  fence, issue) per batch; g the gate's ownership check per host new to the shard, h_new the hosts new to
  a shard per page; push and pull S5's block moves per URL moved, m the share of pages whose host moved
  once (0 with one dispatcher, whose a_1 is the one-dispatcher decision);
- **one core** (``core_cpu``, ``dispatch.one_core``'s model per shard): the fleet crawl's measured CPU per
  page ``c`` on the shard's pages and its fixed ``F``, plus what grows with n beyond the fleet crawl's 2
  nodes (decisions, every node's heartbeats, the tick), plus the shard's additions above and its
  heartbeat's fixed work (a beat every ``shard_heartbeat_s``, a look at the leases every quarter of it).

The wall is the largest n at which that CPU is at most one core; with one shard the second is exactly
``one_core``'s figure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

Medians = Mapping[int, Mapping[str, Any]]  # nodes -> figure -> median
MAX_NODES = 1_000_000


def linear_at(med: Medians, name: str, n: float) -> float:
    """Figure ``name`` at ``n`` nodes: linear between the measured sizes around n; past the largest (or
    below the smallest) along the last (first) two; flat with one size."""
    sizes = sorted(med)
    lo = max([s for s in sizes if s <= n] or [sizes[0]])
    hi = min([s for s in sizes if s > lo] or [lo])
    if hi == lo:
        lo = sizes[-2] if len(sizes) > 1 else lo
        hi = sizes[-1]
    if hi == lo:
        return float(med[lo][name])
    y0, y1 = float(med[lo][name]), float(med[hi][name])
    return y0 + (y1 - y0) * (n - lo) / (hi - lo)


@dataclass(frozen=True, slots=True)
class Fleet:
    """The model's inputs: pages/s per node, pages per batch, the fleet crawl's CPU per page (s) and
    fixed CPU per second (s/s), the periods (s), hosts new to a shard per page, share of pages moved."""

    node_pages_per_s: float
    batch_pages: float
    fleet_s_per_page: float
    fleet_s_per_s: float
    heartbeat_s: float
    tick_s: float
    shard_heartbeat_s: float
    new_hosts_per_page: float
    moved_share: float


def _us(med: Medians, name: str, n: float) -> float:
    """A figure in seconds, linear in n."""
    return linear_at(med, name, n) / 1e6


def flat_us(med: Medians, name: str) -> float:
    """A figure that does not depend on the nodes (per host, per URL moved, per beat) in seconds: its
    median over the sizes measured (0 when not measured: one dispatcher has no gate nor moves)."""
    xs = sorted(float(m[name]) for m in med.values() if isinstance(m.get(name), (int, float)))
    return xs[len(xs) // 2] / 1e6 if xs else 0.0


def shard_per_page(med: Medians, f: Fleet) -> float:
    """What a shard adds per page it issues: the gate's check per new host, S5's moves (s)."""
    moves = flat_us(med, "push_us_per_url") + flat_us(med, "pull_us_per_url")
    return f.new_hosts_per_page * flat_us(med, "gate_us_per_host") + f.moved_share * moves


def decision_cpu(med: Medians, shards: int, n: float, f: Fleet) -> float:
    """One shard's decision CPU per second at ``n`` nodes (see the module docstring)."""
    pages = n * f.node_pages_per_s / shards
    return pages * (_us(med, "decision_us", n) / f.batch_pages + shard_per_page(med, f))


def core_terms(med: Medians, base: Medians, shards: int, n: float, f: Fleet) -> dict[str, float]:
    """One shard's CPU per second at ``n`` nodes by part; ``base``: the one dispatcher's figures (its
    2-node costs are inside the fleet crawl's c and F)."""
    pages = n * f.node_pages_per_s / shards
    beat = flat_us(med, "quiet_beat_us") / f.shard_heartbeat_s + flat_us(med, "look_us") / (f.shard_heartbeat_s / 4)
    return {
        "pages": pages * f.fleet_s_per_page, "fixed": f.fleet_s_per_s,
        "decisions": pages / f.batch_pages * (_us(med, "decision_us", n) - _us(base, "decision_us", 2)),
        "heartbeats": (n * _us(med, "heartbeat_us", n) - 2 * _us(base, "heartbeat_us", 2)) / f.heartbeat_s,
        "ticks": (_us(med, "tick_us", n) - _us(base, "tick_us", 2)) / f.tick_s,
        "shard": pages * shard_per_page(med, f) + beat,
    }  # fmt: skip


def wall(cpu: Callable[[int], float], *, start: int = 2) -> int:
    """The largest n >= ``start`` with ``cpu(n)`` <= 1 (``start`` when even that is over; at most
    ``MAX_NODES``), for a cpu that grows with n: doubling steps, then bisection."""
    ok, step = start, 1
    while ok < MAX_NODES and cpu(min(MAX_NODES, ok + step)) <= 1.0:
        ok, step = min(MAX_NODES, ok + step), step * 2
    over = min(MAX_NODES + 1, ok + step)
    while over - ok > 1:
        mid = (ok + over) // 2
        ok, over = (mid, over) if cpu(mid) <= 1.0 else (ok, mid)
    return ok


def _decision_at(med: Medians, shards: int, f: Fleet, n: int) -> float:
    return decision_cpu(med, shards, n, f)


def _core_at(med: Medians, base: Medians, shards: int, f: Fleet, n: int) -> float:
    return sum(core_terms(med, base, shards, n, f).values())


def walls(base: Medians, by_shards: Mapping[int, Medians], f: Fleet) -> dict[str, Any]:
    """The decision wall and the one-core wall of one dispatcher (``base``) and of each shard count."""
    everyone: dict[int, Medians] = {1: base, **{s: m for s, m in by_shards.items() if s > 1}}
    out: dict[str, Any] = {}
    for s, med in sorted(everyone.items()):
        dec = wall(partial(_decision_at, med, s, f))
        core = wall(partial(_core_at, med, base, s, f))
        out[f"shards_{s}"] = {
            "decision_wall_nodes": dec, "decision_wall_pages_per_s": round(dec * f.node_pages_per_s),
            "one_core_nodes": core, "one_core_pages_per_s": round(core * f.node_pages_per_s),
            "cpu_s_per_s_terms_at_one_core": {k: round(v, 4) for k, v in core_terms(med, base, s, core, f).items()},
            "shard_us_per_page": round(shard_per_page(med, f) * 1e6, 3),
        }  # fmt: skip
    one = out["shards_1"]
    for s in sorted(everyone):
        row = out[f"shards_{s}"]
        row["decision_wall_over_one_dispatcher"] = round(row["decision_wall_nodes"] / one["decision_wall_nodes"], 3)
        row["one_core_over_one_dispatcher"] = round(row["one_core_nodes"] / one["one_core_nodes"], 3)
    return out
