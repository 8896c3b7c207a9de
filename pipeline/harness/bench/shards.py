"""``crawlfleet bench shards``: S5 between dispatcher peers, measured on real RabbitMQ and HBase.

Real processes on this machine next to the testbed: ``--workers`` fetch nodes, ``crawlfleet links --shards
N`` and N ``crawlfleet dispatcher --shard I`` processes on a throwaway HBase prefix and a fresh vhost. Three
parts, one run each:

- **scale**: the same web (every host a seed, shared out by the shards' seed hash) crawled by 1, 2 and 3
  shards (``--shards``): pages/s over the crawl window (first batch to last reply, from the shards' events)
  and each shard's CPU per page (its process, sampled: ``cputrace``);
- **skew**: a web found from one seed (the shard that owns it finds every host at home), with and without
  the communicating-vessels rule (``dispatch.shard_balance``): each shard's pages, the balance (median and
  max over the heartbeats of max/min ready work across the shards, from their summaries), the crawl's
  pages/s, blocks and hosts moved;
- **blocks**: the skewed crawl with the rule at each block size of ``--blocks`` (``dispatch.shard_block_urls``):
  pages/s, blocks and bytes moved, beside S5's own figures (a parabola: a best transfer size).

The web's politeness is the fleet bench's (4 connections per host, no gap, no slow or big pages) unless
``--host-delay`` and ``--per-host`` set a gap and a connection count: with a gap, a host's batch is slow,
so a shard's own slots of each node (``transport.dispatcher.nodes.shard_slots``), not the link rounds, bound
what the shard that finds every host can fetch, and the rule's effect shows in pages/s and pages by shard.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pipeline.harness.bench.cputrace import CpuTrace
from pipeline.harness.bench.fleet import (
    _cleanup_queues,
    _cli,
    _drop_hbase,
    _env,
    _last_json,
    _wait_heartbeats,
)
from pipeline.harness.testbed.harness import TestbedProcess

# S5 (shared/MISSION.md): what the paper reports, beside what is measured here.
S5_CLAIMS = {
    "throughput_vs_transfer_batch": "a parabola: one best batch size",
    "three_nodes_10ms_dedup_cache_plus_large_transfers": "about 4x the throughput",
    "largest_costs": "dedup traffic first, scheduling traffic second",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=60, help="testbed hosts")
    p.add_argument("--pages", type=int, default=60, help="pages per testbed host")
    p.add_argument("--seed", type=int, default=41, help="seed of the testbed's random web")
    p.add_argument("--workers", type=int, default=3, help="fetch nodes")
    p.add_argument("--slots", type=int, default=6, help="batches per node at once")
    p.add_argument("--shards", default="1,2,3", help="shard counts of the scale part, comma-separated")
    p.add_argument("--blocks", default="8,32,128,512", help="block sizes (URLs) of the sweep, comma-separated")
    p.add_argument("--parts", default="scale,skew,blocks", help="which parts to run, comma-separated")
    p.add_argument("--heartbeat-s", type=float, default=1.0, help="the shards' heartbeat period")
    p.add_argument("--host-delay", type=float, default=0.0, help="gap between requests to a host, seconds")
    p.add_argument("--per-host", type=int, default=4, help="connections per host")
    p.add_argument("--active-hosts", type=int, default=8, help="hosts each shard works on at once, at least")
    p.add_argument("--timeout", type=float, default=900.0, help="give up on a crawl after this many seconds")
    p.add_argument("--broker-url", default=None, help="default: a fresh vhost on the local broker, deleted after")
    p.add_argument("--out", default="", help="keep the crawl directories and logs here")


def _ints(text: str, what: str) -> list[int]:
    from pipeline.observe.errors import UsageError

    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise UsageError(f"--{what}: expected comma-separated integers >= 1, got {text!r}")
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pipeline.observe.errors import UsageError

    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"scale", "skew", "blocks"}:
        raise UsageError(f"--parts: expected some of scale,skew,blocks, got {args.parts!r}")
    _ints(args.shards, "shards")  # a bad list is one line before anything starts
    _ints(args.blocks, "blocks")
    if args.host_delay < 0 or args.per_host < 1:
        raise UsageError(f"--host-delay must be >= 0 and --per-host >= 1, got {args.host_delay} and {args.per_host}")
    if args.broker_url:
        return _run(args, args.broker_url, parts)
    from pipeline.harness.faults.services import broker_vhost

    with broker_vhost() as url:  # a vhost of its own: every dispatcher of a vhost hears every node
        return _run(args, url, parts)


def _run(args: argparse.Namespace, broker_url: str, parts: set[str]) -> dict[str, Any]:
    workdir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-shards-"))
    workdir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"web": {"hosts": args.hosts, "pages": args.pages, "seed": args.seed},
                           "host_delay_s": args.host_delay, "per_host": args.per_host,
                           "workers": args.workers, "slots": args.slots, "heartbeat_s": args.heartbeat_s,
                           "s5_claims": S5_CLAIMS}  # fmt: skip
    if "scale" in parts:
        out["scale"] = {str(n): _crawl(args, workdir, broker_url, shards=n) for n in _ints(args.shards, "shards")}
    if "skew" in parts:
        out["skew"] = {mode: _crawl(args, workdir, broker_url, shards=3, one_seed=True, balance=mode == "with_rule")
                       for mode in ("without_rule", "with_rule")}  # fmt: skip
    if "blocks" in parts:
        out["blocks"] = {str(b): _crawl(args, workdir, broker_url, shards=3, one_seed=True, block=b)
                         for b in _ints(args.blocks, "blocks")}  # fmt: skip
    return out


def _crawl(args: argparse.Namespace, workdir: Path, broker_url: str, *, shards: int, one_seed: bool = False,
           balance: bool = True, block: int = 64) -> dict[str, Any]:  # fmt: skip
    """One crawl by ``shards`` shards; its figures (see the module docstring)."""
    from pipeline.transport.wire import topology
    from pipeline.transport.wire.shardwire import wire_name

    tag = uuid.uuid4().hex[:6]
    here = workdir / f"crawl-{shards}-{tag}"
    here.mkdir(parents=True)
    service, nodes = f"bench{tag}", [f"bench{tag}-{i}" for i in range(1, args.workers + 1)]
    procs: list[subprocess.Popen[Any]] = []
    summaries: dict[int, dict[str, Any]] = {}
    traces: dict[int, CpuTrace] = {}
    try:
        with TestbedProcess(args.hosts, args.pages, seed=args.seed, workdir=here / "tb") as tb:
            env = _env(tb, broker_url, service, "hbase", args.per_host)
            env["CRAWLFLEET_POLITENESS_MIN_HOST_DELAY_S"] = str(args.host_delay)
            env.update(CRAWLFLEET_DISPATCH_SHARDS=str(shards), CRAWLFLEET_DISPATCH_SHARD_HEARTBEAT_S=str(args.heartbeat_s),
                       CRAWLFLEET_DISPATCH_SHARD_BLOCK_URLS=str(block), CRAWLFLEET_DISPATCH_SHARD_BALANCE=str(balance).lower(),
                       CRAWLFLEET_DISPATCH_ACTIVE_HOSTS=str(args.active_hosts), CRAWLFLEET_SCOPE_MAX_DEPTH="60")  # fmt: skip
            for node in nodes:
                log = open(here / f"worker-{node}.log", "wb")  # noqa: SIM115 - owned by the process
                procs.append(subprocess.Popen(_cli("worker", "--node", node, "--slots", str(args.slots),
                                                   "--loglevel", "WARNING"), env=env, stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
            _wait_heartbeats(broker_url, set(nodes), timeout_s=120)
            crawl = here / "crawl"
            log = open(here / "links.log", "wb")  # noqa: SIM115 - owned by the process
            procs.append(subprocess.Popen(_cli("links", "--out", str(crawl), "--work-dir", str(here / "jobs")),
                                          env=env, stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
            seeds = tb.seeds[:1] if one_seed else tb.seeds
            started: dict[int, tuple[subprocess.Popen[str], CpuTrace]] = {}
            for i in range(shards):
                cmd = _cli("dispatcher", *seeds, "--out", str(crawl), "--json", "--no-progress")
                if shards > 1:
                    cmd += ["--shard", str(i)]
                err = open(here / f"shard-{i}.log", "w")  # noqa: SIM115 - owned by the process
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
                started[i] = (proc, CpuTrace(proc.pid))
            deadline = time.monotonic() + args.timeout
            for i, (proc, trace) in started.items():
                stdout, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
                if proc.returncode:
                    raise RuntimeError(f"shard {i} exited {proc.returncode}: see {here / f'shard-{i}.log'}")
                summaries[i] = _last_json(stdout)
                traces[i] = trace
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        names = [topology.fetch_queue_name(n) for n in nodes] + [f"crawlfleet.submit.{service}",
                                                                   f"crawlfleet.blocks.{service}"]  # fmt: skip
        names += [topology.results_queue_name(wire_name(service, i, shards)) for i in range(shards)]
        _cleanup_queues(broker_url, names)
        _drop_hbase(service)
    return _figures(crawl, shards, summaries, traces)


def _figures(crawl: Path, shards: int, summaries: dict[int, dict[str, Any]], traces: dict[int, CpuTrace]) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    for i in summaries:
        path = (crawl / f"shard-{i}" if shards > 1 else crawl) / "fleet-events.jsonl"
        events += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    issued = [ev["t"] for ev in events if ev["ev"] == "issue"]
    done = [ev["t"] for ev in events if ev["ev"] == "done"]
    window = max(done) - min(issued) if issued and done else float("nan")
    pages = {i: s.get("pages_fetched", 0) + s.get("pages_failed", 0) for i, s in summaries.items()}
    total = sum(pages.values())
    out: dict[str, Any] = {
        "pages": total, "window_s": round(window, 2), "pages_per_s": round(total / window, 1) if window > 0 else None,
        "pages_by_shard": {str(i): n for i, n in pages.items()},
        "largest_share": round(max(pages.values()) / total, 3) if total else None,
    }  # fmt: skip
    # Each shard's CPU over the crawl window (first batch to last reply: start-up and the end's idle beats
    # left out), per page it fetched; and over its whole life.
    if issued and done:
        steady = {i: t.between(min(issued), max(done)) for i, t in traces.items()}
        out["cpu_ms_per_page_by_shard"] = {str(i): round(1000 * steady[i] / pages[i], 3) if pages[i] else None
                                           for i in pages}  # fmt: skip
    out["cpu_s_by_shard"] = {str(i): round(t.cpu[-1], 2) if t.cpu else None for i, t in traces.items()}
    moves = [s["shard"] for s in summaries.values() if "shard" in s]
    if moves:
        medians = [m["balance_median"] for m in moves if m.get("balance_median") is not None]
        out.update(
            balance_median=round(statistics.median(medians), 2) if medians else None,
            balance_max=max((m["balance_max"] for m in moves if m.get("balance_max") is not None), default=None),
            blocks_pushed=sum(m["pushed_blocks"] for m in moves), hosts_moved=sum(m["pulled_hosts"] for m in moves),
            urls_moved=sum(m["pulled_urls"] for m in moves), block_bytes=sum(m["side"]["bytes_pushed"] for m in moves),
            forwarded_urls=sum(m["forwarded_urls"] for m in moves), takeovers=sum(m["takeovers"] for m in moves),
        )  # fmt: skip
    return out
