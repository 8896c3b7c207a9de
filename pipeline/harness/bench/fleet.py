"""``crawlfleet bench fleet``: the same testbed crawl in fleet mode and embedded, in the same run.

Fleet mode is the real thing: RabbitMQ (``settings.fleet.broker_url``), ``--workers`` Celery worker
processes (``crawlfleet worker``), the fleet dispatcher process and ``crawlfleet links`` on each of
``--runners`` (local and inline on this machine; hadoop on the cluster's YARN with segments on HDFS; spark
on its standalone master, one kept application, with segments on S3), all on this machine next to the
testbed. The embedded default (``crawlfleet crawl``) crawls a fresh copy of the same web with the same
settings, on SQLite and on the fleet's store. Everyone gets the same politeness: ``--per-host``
connections per host (4), no minimum gap, Crawl-delay capped to 0, the slow/big pages left out. The
crawlers run interleaved, ``--repeats`` times: medians and spread (max / min).

Reported per runner: pages/s and its ratio to the embedded crawl on the same store and on SQLite (per
repeat, then the median), the link lag (a segment's reply to its links report, from the dispatcher's
summary), the link jobs' CPU per page (``crawlfleet links``' process tree plus, on a cluster runner, the
cluster's processes: ``clustercpu``) against the link functions' own CPU per page over the same segments
in a plain loop, and that CPU split into the service's children and its own (``linkcpu``), segment
bytes written per page; and as before the crawl window of the
fleet (first batch issued to last report, i.e. without worker start-up) next to its wall time,
broker messages per page and bytes per page (batches out, result packs and heartbeats in).
The dispatcher's CPU is given three ways: over its whole life, over the steady window (first batch
to last reply), and split by a fit over that window's 2-second buckets into a marginal cost per page
and a fixed cost per second (``cputrace.fit_rates``): the figure that says how many pages one
dispatcher core can take is the marginal one, plus the fixed part once. The fetch nodes run at the dev
stack's CPU priority (``--node-nice``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from jobs import cluster
from jobs.runnerconfig import CLUSTER_RUNNERS
from pipeline.harness.bench import clustercpu, fleetstats, jvmcpu, linkcpu
from pipeline.harness.bench.cputrace import CpuTrace, bucket_series, fit_rates
from pipeline.harness.bench.fleetstats import FIT_BUCKET_S, _idle_stats, _link_lag, _rates_fields, summarize
from pipeline.harness.bench.treecpu import GroupCpu
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.settings import arg_type, load_settings
from pipeline.storage.segments import Segments

# The fetch nodes' fleet.node_nice in the one-machine dev stack (docker/fleet/node-*.toml); --node-nice 10
# measures the other side of its trade (docs/FLEET.md, "One machine: pages/s or link lag").
DEV_STACK_NODE_NICE = 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=60, help="testbed hosts")
    p.add_argument("--pages", type=int, default=100, help="pages per testbed host")
    p.add_argument(
        "--seed", type=int, default=7, help="seed of the testbed's (or the simulation's) random web"
    )
    p.add_argument("--workers", type=int, default=2, help="fetch nodes (Celery workers)")
    p.add_argument("--slots", type=int, default=0, help="batches per worker at once (0 = default)")
    p.add_argument(
        "--broker-url", default=None, help="default: a fresh vhost on the local broker, deleted after"
    )
    p.add_argument("--out", default="", help="keep the crawl directories and logs here")
    p.add_argument("--timeout", type=float, default=600.0, help="give up on a crawl after this many seconds")
    p.add_argument(
        "--store",
        choices=("sqlite", "hbase"),
        default="sqlite",
        help="the crawl store of both runs (hbase: settings' Thrift server, a throwaway prefix)",
    )
    p.add_argument("--runners", default="local",
                   help="link-jobs runners to measure, comma-separated (local, inline, hadoop, spark); "
                        "default local, the Procfile's")  # fmt: skip
    p.add_argument("--segments", choices=("auto", "dir", "hdfs", "s3"), default="auto",
                   help="where nodes write segments (auto: a directory for local/inline, HDFS for hadoop, "
                        "S3 for spark)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=3, help="runs of each crawler, interleaved (medians, spread)")
    p.add_argument("--per-host", type=int, default=4, help="connections per host, for every crawler")
    p.add_argument("--link-max-segments", type=int, default=0,
                   help="segments per link-jobs micro-batch (crawlfleet links --max-segments; 0 = its default)")  # fmt: skip
    p.add_argument("--node-nice", type=arg_type("fleet.node_nice"), default=DEV_STACK_NODE_NICE,
                   help="the fetch nodes' fleet.node_nice (default: the dev stack's, docker/fleet/node-*.toml)")  # fmt: skip


def _env(tb: TestbedProcess, broker_url: str, service: str, store: str, per_host: int) -> dict[str, str]:
    extra = {"CRAWLFLEET_STORE_KIND": store}
    if store == "hbase":
        extra["CRAWLFLEET_STORE_HBASE_PREFIX"] = _prefix(service)
    return dict(
        os.environ,
        **extra,
        CRAWLFLEET_BROKER_URL=broker_url,
        CRAWLFLEET_DISPATCH_SERVICE=service,
        CRAWLFLEET_DNS_SERVERS=f"127.0.0.1:{tb.dns_port}",
        CRAWLFLEET_SECURITY_ALLOW_NETWORKS="127.0.10.0/24",
        CRAWLFLEET_POLITENESS_PER_HOST_CONCURRENCY=str(per_host),
        CRAWLFLEET_POLITENESS_PER_IP_CONCURRENCY="64",
        CRAWLFLEET_POLITENESS_MIN_HOST_DELAY_S="0",
        CRAWLFLEET_POLITENESS_MAX_CRAWL_DELAY_S="0",
        CRAWLFLEET_SCOPE_DENY_REGEX=r"/slow$,/big$",
        PYTHONUNBUFFERED="1",
    )


def _prefix(service: str) -> str:
    return f"cfbench_{service}"


def _drop_hbase(service: str) -> None:
    from pipeline.storage.hbase import HBaseStore

    st = load_settings().store
    store = HBaseStore(st.hbase_host, st.hbase_port, prefix=_prefix(service))
    try:
        store.drop()
    finally:
        store.close()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", *args]


def _last_json(text: str) -> dict[str, Any]:
    return dict(json.loads(text.strip().splitlines()[-1]))


def _embedded(args: argparse.Namespace, workdir: Path, broker_url: str, store: str) -> dict[str, Any]:
    service = f"emb{uuid.uuid4().hex[:6]}"
    with TestbedProcess(args.hosts, args.pages, seed=args.seed, workdir=workdir / f"tb-embedded-{service}") as tb:
        out = workdir / f"embedded-{service}"
        t0 = time.monotonic()
        jvm0 = jvmcpu.sample()
        try:
            proc = subprocess.run(_cli("crawl", *tb.seeds, "--out", str(out), "--json", "--no-progress"),
                                  env=_env(tb, broker_url, service, store, args.per_host), capture_output=True,
                                  text=True, timeout=args.timeout, check=True)  # fmt: skip
        finally:
            if store == "hbase":
                _drop_hbase(service)
        wall = time.monotonic() - t0
        jvm = jvmcpu.delta(jvm0, jvmcpu.sample())
    summary = _last_json(proc.stdout)
    return {"pages": summary["pages_fetched"], "pages_per_s": summary["pages_per_s"],
            "elapsed_s": summary["elapsed_s"], "wall_s": round(wall, 2),
            "store_jvm": jvm.to_json(summary["pages_fetched"])}  # fmt: skip


def _wait_heartbeats(broker_url: str, nodes: set[str], timeout_s: float) -> None:
    """Until every node has sent a heartbeat (so worker start-up is not counted as crawl time)."""
    from pipeline.transport.wire import topology
    from pipeline.transport.wire.amqp import connection
    from pipeline.transport.wire.messages import decode, parse_heartbeat

    fleet = load_settings(overrides={"fleet": {"broker_url": broker_url}}).fleet
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    with connection(broker_url) as conn:
        queue = topology.heartbeat_queue(fleet, service="bench", ttl_s=10)(conn.channel())
        queue.declare()
        while seen < nodes:
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers not up after {timeout_s}s: heard {sorted(seen)}")
            msg = queue.get(no_ack=True)
            if msg is None:
                time.sleep(0.1)
                continue
            obj = decode(msg.body, content_type=msg.content_type, content_encoding=msg.content_encoding,
                         max_bytes=fleet.max_message_bytes)  # fmt: skip
            seen.add(parse_heartbeat(obj).node)


def _cleanup_queues(broker_url: str, names: list[str]) -> None:
    from pipeline.transport.wire.amqp import connection

    with connection(broker_url) as conn:
        for name in names:
            ch = conn.channel()
            try:
                ch.queue_delete(name)
            except Exception:  # already gone; a bench leaves no debris either way
                pass
            finally:
                ch.close()


def _fleet(args: argparse.Namespace, workdir: Path, broker_url: str, runner: str, segments: str) -> dict[str, Any]:
    from pipeline.transport.wire import topology

    tag = uuid.uuid4().hex[:6]
    workdir = workdir / f"fleet-{runner}-{tag}"
    workdir.mkdir(parents=True)
    service, nodes = f"bench{tag}", [f"bench{tag}-{i}" for i in range(1, args.workers + 1)]
    workers: list[subprocess.Popen[bytes]] = []
    links: subprocess.Popen[bytes] | None = None
    links_cpu = float("nan")
    links_tree_cpu: float | None = None
    try:
        with TestbedProcess(args.hosts, args.pages, seed=args.seed, workdir=workdir / "tb-fleet") as tb:
            env = _env(tb, broker_url, service, args.store, args.per_host)
            # Merged segments are kept (bytes written per page, the bare function's input); the default
            # deletes them, a store write per segment less.
            seg_root = _segments_root(segments, workdir, tag)
            env.update(CRAWLFLEET_FLEET_SEGMENTS_DIR=seg_root, CRAWLFLEET_FLEET_SEGMENT_RETENTION_S="-1",
                       CRAWLFLEET_FLEET_NODE_NICE=str(args.node_nice))  # read by the nodes only
            for node in nodes:
                cmd = _cli("worker", "--node", node, "--loglevel", "WARNING")
                if args.slots:
                    cmd += ["--slots", str(args.slots)]
                log = open(workdir / f"worker-{node}.log", "wb")  # noqa: SIM115 - owned by the process
                workers.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
            _wait_heartbeats(broker_url, set(nodes), timeout_s=120)
            out = workdir / "fleet"
            log = open(workdir / "links.log", "wb")  # noqa: SIM115 - owned by the process
            link_cmd = _cli("links", "--out", str(out), "--runner", runner, "--work-dir",
                            str(workdir / "jobs-work"), "--log-level", "INFO")  # fmt: skip
            if runner == "spark":
                link_cmd += ["--spark-master", cluster.spark_master()]
            if args.link_max_segments:
                link_cmd += ["--max-segments", str(args.link_max_segments)]
            links = subprocess.Popen(link_cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
            links_group = GroupCpu(links.pid)  # every process it starts, however it ends
            links_trace = CpuTrace(links.pid, tree=True)  # with its extract worker process (and its own part)
            t0 = time.monotonic()
            cpu0 = _children_cpu()
            jvm0 = jvmcpu.sample()
            cluster0 = clustercpu.sample()
            with open(workdir / "dispatcher.log", "w") as err:
                dproc = subprocess.Popen(_cli("dispatcher", *tb.seeds, "--out", str(out), "--json", "--no-progress"),
                                         env=env, stdout=subprocess.PIPE, stderr=err, text=True)  # fmt: skip
                dispatcher_trace = CpuTrace(dproc.pid)
                try:
                    stdout, _ = dproc.communicate(timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    dproc.kill()
                    raise
                if dproc.returncode:
                    raise subprocess.CalledProcessError(dproc.returncode, dproc.args, stdout)
            dispatcher_cpu = _children_cpu() - cpu0  # the only child reaped in between
            tb.flush_log()
            web = fleetstats.served(tb.read_access_log())
            wall = time.monotonic() - t0
            jvm = jvmcpu.delta(jvm0, jvmcpu.sample())
            if links is not None:
                links.terminate()
                links.wait(60)
                links_cpu = _children_cpu() - cpu0 - dispatcher_cpu
                links_tree_cpu = links_group.seconds()
                links_group.close()
            cluster_cpu = clustercpu.sample().minus(cluster0)
            kept = Segments(seg_root)
            seg_bytes = sum(info["size"] for info in linkcpu.done_infos(kept))
            bare = linkcpu.bare_cpu_ms_per_page(kept)
    finally:
        for w in [*workers, *([links] if links is not None else [])]:
            w.terminate()
        for w in workers:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
        _cleanup_queues(broker_url, [topology.fetch_queue_name(n) for n in nodes]
                        + [topology.results_queue_name(service), f"crawlfleet.submit.{service}"])  # fmt: skip
        if args.store == "hbase":
            _drop_hbase(service)
    summary = _last_json(stdout)
    events = [json.loads(line) for line in (out / "fleet-events.jsonl").read_text().splitlines()]
    issued = [ev["t"] for ev in events if ev["ev"] == "issue"]
    done = [ev["t"] for ev in events if ev["ev"] == "done"]
    window = max(done) - min(issued) if issued and done else float("nan")
    # Steady state: CPU between the first batch issued and the last reply, without start-up (imports,
    # connections, reading the store) and shutdown, which a long crawl amortises away.
    steady = dispatcher_trace.between(min(issued), max(done)) if issued and done else float("nan")
    links_steady = links_trace.between(min(issued), max(done)) if issued and done else float("nan")
    replies = [(ev["t"], ev["pages"]) for ev in events if ev["ev"] == "done"]
    rates = fit_rates(bucket_series(dispatcher_trace.times, dispatcher_trace.cpu, replies, t0=min(issued),
                                    t1=max(done), bucket_s=FIT_BUCKET_S)) if issued and done else None  # fmt: skip
    pages = summary["pages_fetched"]
    f = summary["fleet"]
    messages = f["batches_sent"] + f["results_messages"] + f["heartbeats"]
    rounds = fleetstats.link_rounds((workdir / "links.log").read_text(errors="replace"))
    # A cluster round's CPU is its containers' (``cluster_cpu``), not in the round lines (they say 0 there).
    extract_ms = None if runner in CLUSTER_RUNNERS else (rounds or {}).get("cpu", {}).get("extract", {}).get("ms_per_result")
    nbytes = f["batch_bytes"] + f["results_bytes"] + f["heartbeat_bytes"]
    return {
        "pages": pages, "pages_per_s": summary["pages_per_s"], "elapsed_s": summary["elapsed_s"],
        "wall_s": round(wall, 2), "crawl_window_s": round(window, 2),
        "window_pages_per_s": round(pages / window, 1) if window > 0 else None,
        "broker_messages": messages, "messages_per_page": round(messages / max(1, pages), 3),
        "bytes_per_page": round(nbytes / max(1, pages), 1),
        "result_bytes_per_page": round(f["results_bytes"] / max(1, pages), 1),
        "batches": f["batches_sent"], "result_packs": f["results_messages"], "heartbeats": f["heartbeats"],
        "expired_batches": f["expired_batches"], "duplicate_results": f["duplicate_results"],
        "store": summary.get("store", {}),
        "served": web,  # the web server's view: pages answered, requests, repeats
        "dispatcher_cpu_s": round(dispatcher_cpu, 2),
        "dispatcher_cpu_ms_per_page": round(1000 * dispatcher_cpu / max(1, pages), 4),
        "dispatcher_steady_cpu_s": round(steady, 2),
        "dispatcher_steady_cpu_ms_per_page": round(1000 * steady / max(1, pages), 4),
        "dispatcher_startup_and_shutdown_cpu_s": round(dispatcher_cpu - steady, 2),
        **_rates_fields(rates),
        "links_steady_cpu_ms_per_page": round(1000 * links_steady / max(1, pages), 4),
        "links_cpu_s": round(links_cpu, 2),
        "links_cpu_ms_per_page": round(1000 * links_cpu / max(1, pages), 4),
        "link_lag_s": _link_lag(events),
        "link_lag": f.get("link_lag", {}),
        "link_rounds": rounds,
        # The extract job's own CPU a page (the round lines' counts, where it ran) against the bare loop.
        "extract_cpu_ms_per_page": extract_ms,
        "extract_x_bare": round(extract_ms / bare, 3) if extract_ms is not None and bare else None,
        "runner": runner, "segments": seg_root.split("://")[0] if "://" in seg_root else "dir",
        "cluster_cpu": cluster_cpu.to_json(pages),
        # The link jobs' CPU: crawlfleet links' process tree (its cgroup where there is one, else its reaped
        # children's times) and, on a cluster runner, the cluster's processes (containers, executors and the
        # daemons that schedule and store for them) over the crawl.
        "job_cpu_ms_per_page": round(1000 * ((links_cpu if links_tree_cpu is None else links_tree_cpu)
                                             + cluster_cpu.total_s) / max(1, pages), 4),
        "job_cpu_method": "rusage (reaped children)" if links_tree_cpu is None else "cgroup",
        "bare_cpu_ms_per_page": bare,
        "links_tree_cpu_s": links_tree_cpu,  # from the cgroup: the forked tasks' CPU included
        **linkcpu.split(links_tree_cpu, linkcpu.own_at_end(links_trace), pages, bare),
        "segment_bytes_per_page": round(seg_bytes / max(1, pages), 1),
        # The store's JVMs over the same span as the embedded half's figure (dispatcher start to exit).
        "store_jvm": jvm.to_json(pages),
        "link_max_segments": args.link_max_segments or "default",
        "node_nice": args.node_nice,
        "frontier": summary.get("frontier", {}),
        "idle": _idle_stats(events, f, window),
    }  # fmt: skip


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's reaped children so far."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _segments_root(kind: str, workdir: Path, tag: str) -> str:
    if kind == "hdfs":
        return f"{cluster.namenode_uri()}/tmp/crawlfleet-bench/{tag}"
    if kind == "s3":
        return f"s3://crawlfleet/bench-{tag}"
    return str(workdir / "node-segments")


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.broker_url:
        return _run(args, args.broker_url)
    # A vhost of its own: every dispatcher of a vhost hears every node's heartbeat (S1's master and
    # slaves), so a dev stack or another bench on the same broker would take this run's batches.
    from pipeline.harness.faults.services import broker_vhost

    with broker_vhost() as url:
        return _run(args, url)


def _run(args: argparse.Namespace, broker_url: str) -> dict[str, Any]:
    runners = [r.strip() for r in args.runners.split(",") if r.strip()]
    stores = ["sqlite", args.store] if args.store != "sqlite" else ["sqlite"]
    workdir = Path(args.out or tempfile.mkdtemp(prefix="bench-fleet-"))
    workdir.mkdir(parents=True, exist_ok=True)
    embedded: dict[str, list[dict[str, Any]]] = {s: [] for s in stores}
    fleet: dict[str, list[dict[str, Any]]] = {r: [] for r in runners}
    try:
        for _ in range(args.repeats):  # interleaved: load drifts hit every crawler alike
            for store in stores:
                embedded[store].append(_loaded(_embedded, args, workdir, broker_url, store))
            for runner in runners:
                fleet[runner].append(_loaded(_fleet, args, workdir, broker_url, runner, _kind(args.segments, runner)))
    finally:
        if not args.out:
            shutil.rmtree(workdir, ignore_errors=True)
    return summarize(args, embedded, fleet)


def _loaded(crawl: Any, *args: Any) -> dict[str, Any]:
    """One crawl's figures with the machine's 1-minute load average before and after it (it is shared)."""
    before = round(os.getloadavg()[0], 2)
    out: dict[str, Any] = crawl(*args)
    out["loadavg_1m"] = [before, round(os.getloadavg()[0], 2)]
    return out


def _kind(segments: str, runner: str) -> str:
    if segments != "auto":
        return segments
    return {"hadoop": "hdfs", "spark": "s3"}.get(runner, "dir")
