"""``crawlfleet bench s3 --json``: S3's n_i = k*avg/t_i across fetch nodes of really different speed.

A real fleet crawl of the testbed with three fetch nodes (Celery workers, one virtual fetcher each so
a node's batches run one after another) whose speed differs by a real limit. ``--means bandwidth``
(the default): each node resolves every testbed name to its own throttling proxy (``throttle.py``)
whose responses pass at 1x, 2x, 4x ``--kbps`` KB/s, like three sites behind links of different speed;
with pages of 10-30 KB a batch's time is then its bytes over the node's bandwidth, which grows with its
size (S3's model, time = n * t_i). ``--means cpu``: each node's processes run in a cgroup (v1 ``cpu``)
capped at 1x, 2x, 4x ``--cpu-pct`` of one core; tried, the equal-batch spread stayed small because
part of every batch's time (politeness gaps, robots.txt, the reply's trip) is not CPU-bound.
(``--means delay``: node i waits (4 / speed) * d between two requests to one host; ``--means sockets``:
node i has speed x ``--sockets`` connections. Both were tried: a batch's URLs are grouped by host, at
most k/4 per host, so under a per-host gap a batch takes about (k/4) * gap whatever its size, and
connections were not the limit.)
The crawl runs twice on the same web:

- **n_i**: S3's sizing (``dispatch.n_min``/``n_max`` wide open), and
- **equal batches**: every batch k URLs (``n_min = n_max = k``), the baseline.

Round r is the r-th batch of every node. Its spread is max/min of the three batches' completion times
(``elapsed_s`` of the nodes' reports, as the dispatcher journals them in fleet-events.jsonl). The
warm-up ends when every node's batch size has settled (``s3rounds.py``: >= ``--settle-min-batches``
batches behind it and its sizes as issued within ``--settle-tolerance`` over its last ``--settle-span``
rounds; a batch the frontier cut short keeps it going), by the same rule for n_i and for equal batches;
the JSON lists every round, warm-up included, with its sizes, times and why it did not count.
``--warmup-rounds N`` uses a fixed warm-up instead (the rule of the runs before f383ea4, to repeat them). S3's goal: batches of
nodes of different speed finish at about the same time; ours: median spread <= 1.25 with n_i and at
least 2x better than equal batches. The simulation (``bench dispatch``) stays a unit check.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from pipeline.harness.bench.amqp import private_vhost
from pipeline.harness.bench.jobs import machine
from pipeline.harness.bench.s3rounds import WarmupRule, finished, judge, node_batches
from pipeline.harness.bench.throttle import Paths
from pipeline.harness.faults.bed import Bed
from pipeline.harness.faults.fleet import FleetRig

SPEEDS = (1, 2, 4)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=int, default=32, help="S3 base batch size")
    p.add_argument(
        "--delay-s", type=float, default=0.05, help="the fastest node's gap between requests to one host"
    )
    p.add_argument(
        "--rounds", type=int, default=12, help="rounds counted per configuration (after the warm-up)"
    )
    p.add_argument(
        "--warmup-rounds",
        type=int,
        default=None,
        help="a fixed warm-up of this many rounds instead of waiting until settled",
    )
    p.add_argument(
        "--settle-min-batches", type=int, default=3, help="batches behind every node before a round counts"
    )
    p.add_argument(
        "--settle-span", type=int, default=3, help="rounds over which a node's batch size must hold"
    )
    p.add_argument(
        "--settle-tolerance", type=float, default=0.10, help="how far sizes may differ then (max/min - 1)"
    )
    p.add_argument(
        "--max-warmup-rounds", type=int, default=40, help="warm-up cap; later rounds count, flagged"
    )
    p.add_argument("--timeout-s", type=float, default=600.0, help="longest a configuration may run")
    p.add_argument("--hosts", type=int, default=120, help="testbed hosts")
    p.add_argument("--pages", type=int, default=120, help="testbed pages per host")
    p.add_argument("--seed", type=int, default=33, help="seed of the testbed's random web")
    p.add_argument(
        "--means",
        choices=("bandwidth", "cpu", "sockets", "delay"),
        default="bandwidth",
        help="bandwidth: node i's responses come through its own proxy at speed x --kbps KB/s "
        "(bench/throttle.py); cpu: node i's processes capped at speed x --cpu-pct of a core (cgroup v1 cpu); "
        "sockets: node i has speed x --sockets connections in all (same politeness gap d); "
        "delay: node i waits (4 / speed) * d between requests to one host",
    )
    p.add_argument(
        "--kbps", type=float, default=100.0, help="bandwidth of the 1x node's path, KB/s (--means bandwidth)"
    )
    p.add_argument("--cpu-pct", type=float, default=6.0, help="CPU cap of the 1x node, percent of one core")
    p.add_argument("--sockets", type=int, default=1, help="connections of the 1x node with --means sockets")
    p.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672", help="broker URL without vhost")


class CpuGroup:
    """A cgroup v1 ``cpu`` group capping one node's processes at ``pct`` percent of one core (root only)."""

    ROOT = Path("/sys/fs/cgroup/cpu")

    def __init__(self, name: str, *, pct: float, root_pid: int) -> None:
        self.path = self.ROOT / name
        self.path.mkdir(exist_ok=True)
        period = int((self.path / "cpu.cfs_period_us").read_text())
        (self.path / "cpu.cfs_quota_us").write_text(str(max(1000, int(period * pct / 100))))
        self.root_pid = root_pid
        self.adopt()

    def adopt(self) -> None:
        """Move the root process and all its descendants (every thread with them) into the group."""
        children: dict[int, list[int]] = defaultdict(list)
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                children[int(fields[1])].append(int(stat.parent.name))
            except (OSError, IndexError, ValueError):
                continue
        todo, seen = [self.root_pid], set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            todo += children.get(pid, [])
            with contextlib.suppress(OSError):  # it exited meanwhile
                (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        try:
            for pid in (self.path / "cgroup.procs").read_text().split():  # survivors back to the root group
                with contextlib.suppress(OSError):
                    (self.ROOT / "cgroup.procs").write_text(pid)
            self.path.rmdir()
        except OSError:
            pass


def warmup_rule(args: argparse.Namespace) -> WarmupRule:
    return WarmupRule(min_batches=args.settle_min_batches, span=args.settle_span, tolerance=args.settle_tolerance,
                      max_rounds=args.max_warmup_rounds, fixed=args.warmup_rounds)  # fmt: skip


def _crawl(bed: Bed, broker: str, workdir: Path, args: argparse.Namespace, *, equal: bool) -> dict[str, Any]:
    lo, hi = (args.k, args.k) if equal else (4, 8 * args.k)
    env = {"CRAWLFLEET_DISPATCH_K": str(args.k), "CRAWLFLEET_DISPATCH_N_MIN": str(lo),
           "CRAWLFLEET_DISPATCH_N_MAX": str(hi), "CRAWLFLEET_POLITENESS_PER_HOST_CONCURRENCY": "1"}  # fmt: skip
    rig = FleetRig(bed, broker, workdir, slots=1, extra_env=env, log_level="WARNING", heartbeat_s=1.0,
                   lease_s=120.0, host_delay=args.delay_s)  # fmt: skip
    base_env = rig.env
    nodes: list[str] = []
    groups: list[CpuGroup] = []
    paths = Paths() if args.means == "bandwidth" else None
    try:
        for i, speed in enumerate(SPEEDS, start=1):  # node i waits (4 / speed) * d between requests to a host
            if paths is not None:  # node i's own resolver sends it through its own proxy at speed x kbps
                path = paths.add(f"127.0.10.{200 + i}", port=bed.tb.port, target="127.0.10.1",
                                 rate=args.kbps * 1000 * speed)  # fmt: skip
                rig.env = dict(base_env, CRAWLFLEET_DNS_SERVERS=path.dns_server)
            elif args.means == "cpu":
                rig.env = base_env
            elif args.means == "delay":
                rig.env = dict(
                    base_env, CRAWLFLEET_POLITENESS_MIN_HOST_DELAY_S=str(args.delay_s * max(SPEEDS) / speed)
                )
            else:
                rig.env = dict(base_env, CRAWLFLEET_FETCH_CONCURRENCY=str(args.sockets * speed))
            w = rig.start_worker(i)
            nodes.append(rig.node(i))
            if args.means == "cpu" and w.proc is not None:
                groups.append(CpuGroup(f"cf-s3-{rig.node(i)}", pct=args.cpu_pct * speed, root_pid=w.proc.pid))
        rig.env = base_env
        start = time.time()
        rig.start_dispatcher()
        rule = warmup_rule(args)
        while time.time() - start < args.timeout_s and rig.dispatcher.running:
            if finished(judge(node_batches(rig.events(), nodes), nodes, rule), rounds=args.rounds, rule=rule):
                break
            for g in groups:
                g.adopt()  # the worker's children (Celery's pool) join their node's cgroup
            time.sleep(1.0)
        end = time.time()
    finally:
        rig.close()
        for g in groups:
            g.remove()
        if paths is not None:
            paths.close()
    events = rig.events()
    j = judge(node_batches(events, nodes), nodes, warmup_rule(args))
    counted = j.counted
    med, med_wall = j.median(), j.median(wall=True)
    sizes: dict[str, list[int]] = defaultdict(list)
    for ev in events:
        if ev["ev"] == "issue":
            sizes[ev["node"]].append(int(ev["n"]))
    last = list(j.rounds[-1].sizes) if j.rounds else []  # node order: 1x, 2x, 4x
    return {
        # The measured sizes of the last round, slowest node first: S3 wants them in the nodes' speed order.
        "last_round_sizes_by_speed": last,
        "sizes_ordered_by_speed": len(last) == len(SPEEDS) and all(a < b for a, b in zip(last, last[1:], strict=False)),
        "fastest_over_slowest": round(last[-1] / last[0], 2) if len(last) == len(SPEEDS) and last[0] else None,
        "equal_batches": equal, "wall_s": round(end - start, 1), "rounds": len(counted),
        "warmup_rounds": j.warmup, "settled": j.settled, "warmup_reason": j.reason,
        "median_spread": round(med, 3) if med is not None else None,
        "spreads": [round(r.spread, 3) for r in counted],
        "median_spread_wall": round(med_wall, 3) if med_wall is not None else None,
        "spreads_wall": [round(r.spread_wall, 3) for r in counted if r.spread_wall is not None],
        "all_rounds": [r.as_json() for r in j.rounds],
        "node_order": nodes,
        "nodes": {n: {"speed": s, "means": args.means,
                      "limit": {"cpu": f"{args.cpu_pct * s:g}% of a core", "sockets": args.sockets * s,
                                "delay": args.delay_s * max(SPEEDS) / s,
                                "bandwidth": f"{args.kbps * s:g} KB/s"}[args.means],
                      "bytes_through_path": paths.paths[i].proxy.bytes_down if paths is not None else None,
                      "batch_sizes_last": sizes[n][-3:], "batches": len(sizes[n])}
                  for i, (n, s) in enumerate(zip(nodes, SPEEDS, strict=True))},
    }  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="cf-bench-s3-") as tmp, private_vhost(args.broker) as broker:
        bed = Bed.start(args.hosts, args.pages, seed=args.seed, workdir=Path(tmp) / "tb")
        try:
            ni = _crawl(bed, broker, Path(tmp) / "ni", args, equal=False)
            eq = _crawl(bed, broker, Path(tmp) / "equal", args, equal=True)
        finally:
            bed.close()
    m_ni, m_eq = ni["median_spread"], eq["median_spread"]
    better = round(m_eq / m_ni, 3) if m_ni and m_eq else None
    w_ni, w_eq = ni["median_spread_wall"], eq["median_spread_wall"]
    return {
        "bench": "s3", "machine": machine(), "k": args.k, "delay_s": args.delay_s, "speeds": list(SPEEDS),
        "means": args.means, "kbps_1x": args.kbps if args.means == "bandwidth" else None,
        "warmup_rule": {"fixed_rounds": args.warmup_rounds, "min_batches": args.settle_min_batches,
                        "span": args.settle_span, "tolerance": args.settle_tolerance,
                        "max_rounds": args.max_warmup_rounds},
        "load_avg_1_5_15": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
        "n_i": ni, "equal": eq, "median_spread_n_i": m_ni, "median_spread_equal": m_eq,
        "times_better_than_equal": better,
        "median_spread_wall_n_i": w_ni, "median_spread_wall_equal": w_eq,
        "times_better_than_equal_wall": round(w_eq / w_ni, 3) if w_ni and w_eq else None,
        "goal": {"median_spread_le_1.25": m_ni is not None and m_ni <= 1.25, "ge_2x_better": (better or 0) >= 2.0},
    }  # fmt: skip
