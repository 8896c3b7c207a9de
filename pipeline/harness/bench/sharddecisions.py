"""``bench dispatch --shards``: N dispatcher shards' decision paths at M simulated nodes (simulated seams).

Each shard is the one-dispatcher bench's harness (decisions.py: a real ``FleetDispatcher`` over a real
``CrawlCore``, no broker) set up as shard I of N, as ``crawlfleet dispatcher --shard I`` runs it: its
``ShardPeer`` (lease, hosts, S5's vessels), its frontier's gate (``ShardHosts.admit``), its node table
split as the real one splits it (``FleetNodes(shards=N, shard=I)``: every N-th slot of each node), its
S1 quota share. Every shard hears every node's heartbeat (the fanout exchange), so each shard's choice
looks at all M nodes, over its own slots. The new hosts of each links report are claimed for the shard
first, as the link jobs' router does (not timed: the link jobs' work), so the shard's gate reads one
owner record per host new to it.

Where a fleet's shards talk to HBase and RabbitMQ, in-memory fakes stand in (shardseams.py): the owner,
lease and state records, and the remote queue. The figures are CPU of this process only; the store's
round trips are counted (``store_ops_per_page``, ``ops``), not timed.

Per shard, ``drive`` (decisions.py) times the decision path (``decision_us``: choice + next_batch + the
lease fence + issue, per batch), the completion path per page (the gate included), heartbeats and ticks.
Then, beside it:

- **gate**: ``ShardHosts.admit`` on hosts the router gave this shard (the ownership check: one record
  read) and on hosts nobody owns (the claim at home: a read and a compare-and-set), per host;
- **moves** (N >= 2): S5's block moves, each shard's real heartbeat (``ShardPeer._beat``): shard 0 given
  four blocks' worth of new hosts more than any peer, then its beat (the rule pushes whole hosts in
  blocks: their records in transit, the blocks encoded and signed), then its peers' (they pull the blocks
  and take the hosts), then a beat of each that moves nothing (its fixed cost); per URL and per host moved.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from pipeline.dispatch.vessels import Levels
from pipeline.harness.bench.decisions import FIGURES, Harness, K, bench_settings, drive
from pipeline.harness.bench.shardseams import (
    MemoryMeta,
    MemorySide,
    MetaOps,
    MetaView,
    RemoteQueue,
    SharedMetaStore,
)
from pipeline.settings import Settings
from pipeline.storage.base import Store
from pipeline.storage.hostowners import HostOwners
from pipeline.transport.dispatcher.nodes import shard_slots
from pipeline.transport.dispatcher.shard import ShardPeer

GATE_HOSTS = 256  # hosts timed through the gate, each way
SHARD_FIGURES = (*FIGURES, "gate_us_per_host", "claim_us_per_host", "fence_us", "store_ops_per_page")
MOVE_FIGURES = ("push_us_per_url", "push_us_per_host", "pull_us_per_url", "pull_us_per_host", "quiet_beat_us",
                "look_us")  # fmt: skip


def shard_settings(out: Path, shards: int, index: int, *, block_urls: int | None = None) -> Settings:
    """The one-dispatcher bench's settings as shard ``index`` of ``shards`` (the store check that asks for
    HBase is not applied: the shared records are faked, shardseams.py)."""
    d: dict[str, Any] = {"shards": shards, "shard": index}
    if block_urls:
        d["shard_block_urls"] = block_urls
    return bench_settings(out).with_overrides({"dispatch": d})


class ShardHarness(Harness):
    """Shard ``index`` of ``shards`` with ``nodes`` nodes of ``slots`` slots, its peers' records in ``meta``."""

    def __init__(self, nodes: int, out: Path, *, slots: int, shards: int, index: int, meta: MemoryMeta,
                 queue: RemoteQueue, block_urls: int | None = None) -> None:  # fmt: skip
        self.meta, self.queue, self.index = meta, queue, index
        settings = shard_settings(out, shards, index, block_urls=block_urls)
        # The link jobs' router, on a store connection of its own: its claims are not this shard's traffic.
        self.router = HostOwners(cast(Store, MetaView(meta)), settings.dispatch.service)
        out.mkdir(parents=True, exist_ok=True)
        super().__init__(nodes, out, slots=slots, settings=settings)
        self._host = 1 + index * 1_000_000_000  # each shard's web its own hosts

    def open_store(self, out: Path) -> Store:
        self.shard_store = SharedMetaStore(out / "crawl.db", self.meta)
        return self.shard_store

    def before_open(self) -> None:
        keeper = MetaView(self.meta)  # the lease keeper's thread opens a store connection of its own
        peer = ShardPeer(self.settings, self.store, clock=self.d.clock, wall=time.time,
                         open_store=lambda: cast(Store, keeper), event=self.d._event)  # fmt: skip
        peer.side = MemorySide(self.settings.fleet, self.settings.dispatch.service, self.queue)
        peer.join()
        self.d.shard = self.peer = peer

    def route(self, hosts: dict[str, int]) -> None:
        for host in hosts:
            self.router.claim(host, self.index)

    def close(self) -> None:
        self.peer.leave(done=True)
        super().close()


def gate(h: ShardHarness, hosts: int = GATE_HOSTS) -> dict[str, float]:
    """The gate's CPU per host: a host routed here (the ownership check) and one nobody owns (the claim)."""
    tag = uuid.uuid4().hex[:6]
    routed = [f"g{tag}-{j}.bench.test" for j in range(hosts)]
    h.route(dict.fromkeys(routed, 16))
    unowned = [f"u{tag}-{j}.bench.test" for j in range(hosts)]
    admit = h.peer.hosts.admit
    t = time.process_time()
    for host in routed:
        admit(host, 16)
    check = time.process_time() - t
    t = time.process_time()
    for host in unowned:
        admit(host, 16)
    claim = time.process_time() - t
    t = time.process_time()
    for _ in range(1000):
        h.peer.may_act()
    fence = time.process_time() - t
    for host in routed + unowned:  # admitted without a frontier state: not the crawl's hosts
        h.peer.hosts.owned.pop(host, None)
    return {"gate_us_per_host": round(check / hosts * 1e6, 2), "claim_us_per_host": round(claim / hosts * 1e6, 2),
            "fence_us": round(fence / 1000 * 1e6, 3)}  # fmt: skip


def _beat(h: ShardHarness) -> float:
    t = time.process_time()
    h.peer._beat(idle=False, busy_hosts=frozenset())
    return time.process_time() - t


def _pending(h: ShardHarness) -> int:
    assert h.d.core is not None
    return h.d.core.frontier.pending


def moves(hs: Sequence[ShardHarness]) -> dict[str, Any]:
    """S5's block moves between the shards ``hs`` (see the module docstring)."""
    src, peers = hs[0], hs[1:]
    block = src.settings.dispatch.shard_block_urls
    extra = max(_pending(h) for h in hs) - _pending(src) + 4 * block
    src.hear([src.new_urls(max(1, -(-extra // K)))])
    for h in hs:  # windows of these beats alone: the move answers this surplus, not the drive's levels
        h.peer.levels = Levels(window=h.settings.dispatch.shard_window)
    for h in peers:
        _beat(h)  # each publishes its level
    out0 = src.peer.hosts.moves
    before = (out0.pushed_urls, out0.pushed_hosts, out0.pushed_blocks)
    push_s = _beat(src)
    pushed = (out0.pushed_urls - before[0], out0.pushed_hosts - before[1], out0.pushed_blocks - before[2])
    pulled_before = [(h.peer.hosts.moves.pulled_urls, h.peer.hosts.moves.pulled_hosts) for h in peers]
    pull_s = sum(_beat(h) for h in peers)
    pulled_urls = sum(h.peer.hosts.moves.pulled_urls - b[0] for h, b in zip(peers, pulled_before, strict=True))
    pulled_hosts = sum(h.peer.hosts.moves.pulled_hosts - b[1] for h, b in zip(peers, pulled_before, strict=True))
    quiet = []
    for h in hs:
        h.peer.hosts.queue_empty = True
        ops, moved = h.shard_store.ops.copy(), _moved(h)
        took = _beat(h)
        if moved == _moved(h):
            quiet.append((took, h.shard_store.ops.minus(ops)))
    look = []
    for h in hs:
        t = time.process_time()
        h.peer._look()
        look.append(time.process_time() - t)

    def per(s: float, n: int) -> float | None:
        return round(s / n * 1e6, 2) if n else None

    return {
        "block_urls": block, "pushed_urls": pushed[0], "pushed_hosts": pushed[1], "pushed_blocks": pushed[2],
        "pulled_urls": pulled_urls, "pulled_hosts": pulled_hosts, "blocks_left": len(src.queue.messages),
        "push_us": round(push_s * 1e6, 1), "pull_us": round(pull_s * 1e6, 1),
        "push_us_per_url": per(push_s, pushed[0]), "push_us_per_host": per(push_s, pushed[1]),
        "pull_us_per_url": per(pull_s, pulled_urls), "pull_us_per_host": per(pull_s, pulled_hosts),
        "quiet_beat_us": round(statistics.median(t for t, _ in quiet) * 1e6, 1) if quiet else None,
        "quiet_beat_store_ops": vars_of(quiet[0][1]) if quiet else None,
        "look_us": round(statistics.median(look) * 1e6, 1),
    }  # fmt: skip


def _moved(h: ShardHarness) -> int:
    return h.peer.hosts.moves.pushed_urls + h.peer.hosts.moves.pulled_urls


def vars_of(ops: MetaOps) -> dict[str, int]:
    return {"get": ops.get, "put": ops.put, "swap": ops.swap, "scan": ops.scan}


def measure_shards(nodes: int, shards: int, *, seconds: float, slots: int, out: Path,
                   block_urls: int | None = None) -> dict[str, Any]:  # fmt: skip
    """``shards`` shards over ``nodes`` nodes: each driven ``seconds`` in turn, then gate and moves."""
    meta, queue = MemoryMeta(), RemoteQueue()
    hs: list[ShardHarness] = []
    try:
        for i in range(shards):
            hs.append(ShardHarness(nodes, out / f"shard-{i}", slots=slots, shards=shards, index=i, meta=meta,
                                   queue=queue, block_urls=block_urls))  # fmt: skip
        runs = []
        for h in hs:
            ops = h.shard_store.ops.copy()
            fig = drive(h, seconds=seconds)
            used = h.shard_store.ops.minus(ops)
            pages = fig["batches_issued"] * fig["pages_per_batch"]
            fig.update(shard=h.index, shard_slots_per_node=len(shard_slots(slots, shards=shards, shard=h.index)),
                       ops=vars_of(used), store_ops_per_page=round(used.total() / pages, 4) if pages else None)  # fmt: skip
            fig.update(gate(h))
            runs.append(fig)
        return {"nodes": nodes, "shards_count": shards, "shards": runs, "moves": moves(hs) if shards > 1 else {}}
    finally:
        for h in hs:
            h.close()


def pooled(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over every shard of every run, and its spread (max/min)."""
    out: dict[str, Any] = {}
    shard_figs = [f for r in runs for f in r["shards"]]
    move_figs = [r["moves"] for r in runs if r["moves"]]
    for names, figs in ((SHARD_FIGURES, shard_figs), (MOVE_FIGURES, move_figs)):
        for name in names:
            xs = [f[name] for f in figs if isinstance(f.get(name), (int, float)) and f[name] == f[name]]
            if xs:
                out[name] = statistics.median(xs)
                out[f"{name}_spread"] = round(max(xs) / min(xs), 3) if min(xs) > 0 else None
    return out


def run_shard_counts(counts: Sequence[int], sizes: Sequence[int], *, repeats: int, seconds: float, slots: int,
                     block_urls: int | None = None) -> dict[str, Any]:  # fmt: skip
    """``repeats`` rounds over ``sizes`` and the shard ``counts`` (> 1), interleaved."""
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {(s, n): [] for s in counts for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            for s in counts:
                with tempfile.TemporaryDirectory(prefix="crawlfleet-shards-") as tmp:
                    runs[s, n].append(measure_shards(n, s, seconds=seconds, slots=slots, out=Path(tmp),
                                                     block_urls=block_urls))  # fmt: skip
    return {f"shards_{s}": {f"nodes_{n}": {"median": pooled(runs[s, n]), "runs": runs[s, n]} for n in sizes}
            for s in counts}  # fmt: skip
