"""``crawlfleet bench s5fleet``: S5's local dedup cache and large-granularity transfers in the real fleet.

1. **Segments from a real crawl.** A fleet crawl of the testbed (``--workers`` Celery fetch nodes, the
   dispatcher and ``crawlfleet links``, HBase store, on a fresh vhost) records its nodes' segments and
   the crawl's link rules and its rounds (which segments each ``links`` report named); or
   ``--segments DIR`` replays a recorded set (``--keep-segments DIR`` writes one).
2. **The real link processing against real HBase at a distance.** The segments go through
   ``LinkPipeline`` (the ``crawlfleet links`` code: ``mr_extract_links`` then ``mr_update_crawldb``,
   inline runner, the S5 ``SeenFilter`` and its snapshot carried from round to round) in the live
   crawl's rounds (or ``--segments-per-round`` at a time, in closing order), into a fresh HBase table
   prefix reached through ``netproxy`` with ``--latency-ms`` added to every round trip (the request
   direction is delayed).
3. **Configurations**, each on its own fresh prefix and proxy: S5's baseline (no LRU, one look-up per
   URL: ``lru_size=0``, ``batch_size=1``), the LRU alone, batching alone, and the LRU with transfer
   batch sizes ``--batch-sizes`` (S5: throughput against batch size is a parabola). At each
   ``--latency-sweep`` latency, the baseline and the production setting again (S5: throughput falls
   fast as latency grows).

Throughput is link-processing pages per wall second (every page of every segment, extraction included)
and every figure is also a ratio to the baseline measured in the same run. Every configuration must
find the same new URLs (checked). S5 reports about 4x on 3 nodes at 10 ms. The machine is shared, so
a configuration that runs under ``REPEAT_UNDER_S`` is run ``--repeat`` times and its best run kept
(the baseline, minutes long and mostly waiting, runs once).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from jobs.runner import LinkPipeline
from jobs.runnerconfig import RunnerConfig
from pipeline.harness.bench.jobs import machine
from pipeline.harness.faults.netproxy import ProxyProcess, Route
from pipeline.settings import StoreSettings, load_settings
from pipeline.storage.hbase import HBaseStore
from pipeline.storage.segments import DONE_DIR
from pipeline.transport.links.rounds import round_id
from pipeline.transport.links.rules import RULES_KEY, CrawlLinkRules

S5_CLAIM = "~4x throughput with the local dedup cache + large-granularity transfer (3 nodes, 10 ms latency)"
PRODUCTION = (200_000, 500)  # LinkJobsService's defaults: lru_size, batch_size
RULES_FILE = "rules.json"
ROUNDS_FILE = "rounds.json"
REPEAT_UNDER_S = 30.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=12, help="testbed hosts of the recording crawl")
    p.add_argument("--pages", type=int, default=40, help="testbed pages per host")
    p.add_argument("--seed", type=int, default=5, help="seed of the testbed's random web")
    p.add_argument("--workers", type=int, default=2, help="fetch nodes of the recording crawl")
    p.add_argument("--segments", type=Path, default=None, help="replay this recorded segment set instead")
    p.add_argument("--keep-segments", type=Path, default=None, help="copy the crawl's segments (and rules) here")
    p.add_argument("--latency-ms", type=float, default=10.0, help="added to every link-job <-> HBase round trip")
    p.add_argument("--batch-sizes", default="1,10,100,500,1000,5000", help="transfer batch sizes swept with the LRU")
    p.add_argument("--lru-size", type=int, default=PRODUCTION[0], help="S5 LRU size of the configurations that use one")
    p.add_argument("--segments-per-round", type=int, default=0,
                   help="segments per link-jobs round (0: the live crawl's rounds as recorded)")
    p.add_argument("--repeat", type=int, default=3, help=f"runs of a configuration shorter than {REPEAT_UNDER_S:g} s (best kept)")
    p.add_argument("--latency-sweep", default="0", help="more latencies (ms) for the baseline and the production setting")
    p.add_argument("--work-dir", type=Path, default=None, help="mrjob work space (default: a temporary directory)")
    p.add_argument("--timeout", type=float, default=600.0, help="the recording crawl's time limit")


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-s5fleet-"))
    work.mkdir(parents=True, exist_ok=True)
    st = load_settings().store
    host, port = st.hbase_host, st.hbase_port
    out: dict[str, Any] = {"machine": machine(), "s5_claim": S5_CLAIM}
    if args.segments:
        root, rules, crawl = args.segments, _read_rules(args.segments), {"recorded": str(args.segments)}
    else:
        root, rules, crawl = record_crawl(args, work, host, port)
    segments = recorded(root)
    rounds = rounds_of(root, segments, per_round=args.segments_per_round)
    if args.keep_segments:
        keep(segments, rounds, rules, args.keep_segments)
    pages = sum(_lines(s) for s in segments)
    out["input"] = {**crawl, "segments": len(segments), "pages": pages, "rounds": len(rounds),
                    "segments_per_round": args.segments_per_round or "as recorded",
                    "rules": json.loads(rules.to_json())}  # fmt: skip
    lru, prod_batch = args.lru_size, PRODUCTION[1]
    sizes = [int(x) for x in args.batch_sizes.split(",") if x]
    configs = [("baseline_no_lru_per_url", 0, 1), ("no_lru_batch_500", 0, prod_batch), ("lru_per_url", lru, 1),
               *[(f"lru_batch_{b}", lru, b) for b in sizes if b != 1]]  # fmt: skip
    runs: dict[str, Any] = {}
    news: dict[str, set[str]] = {}
    for label, lru_size, batch in configs:
        runs[label], news[label] = best_of(args.repeat, rounds, rules, pages, host=host, port=port,
                                           latency_ms=args.latency_ms, lru_size=lru_size, batch_size=batch,
                                           work=work / label)  # fmt: skip
    base = runs["baseline_no_lru_per_url"]["pages_per_s"]
    base_update = runs["baseline_no_lru_per_url"]["update_candidates_per_s"]
    for r in runs.values():
        r["throughput_x"] = round(r["pages_per_s"] / base, 2)
        r["update_step_x"] = round(r["update_candidates_per_s"] / base_update, 2)
    sweep = {b: runs["lru_per_url" if b == 1 else f"lru_batch_{b}"]["pages_per_s"] for b in sizes}
    out[f"at_{args.latency_ms:g}ms"] = runs
    out["batch_sweep_pages_per_s"] = {str(b): v for b, v in sweep.items()}
    out["best_batch_size"] = max(sweep, key=lambda b: sweep[b])
    # Where the granularity stops mattering: the smallest batch that makes as few store calls as any (a
    # count, not a time, so it does not move with the machine's load).
    calls = {b: runs["lru_per_url" if b == 1 else f"lru_batch_{b}"]["store_calls"] for b in sizes}
    out["batch_sweep_store_calls"] = {str(b): v for b, v in calls.items()}
    out["fewest_calls_from_batch"] = min(b for b in sizes if calls[b] == min(calls.values()))
    out["s5_production_x"] = runs[f"lru_batch_{prod_batch}"]["throughput_x"] if prod_batch in sizes else None
    out["s5_best_x"] = round(max(sweep.values()) / base, 2)
    out["latency_sweep"] = {}
    for ms in [float(x) for x in args.latency_sweep.split(",") if x]:
        pair: dict[str, Any] = {}
        for label, lru_size, batch in (("baseline_no_lru_per_url", 0, 1), ("production", lru, prod_batch)):
            pair[label], news[f"{label}@{ms:g}"] = best_of(args.repeat, rounds, rules, pages, host=host, port=port,
                                                           latency_ms=ms, lru_size=lru_size, batch_size=batch,
                                                           work=work / f"{label}-{ms:g}ms")  # fmt: skip
        pair["production_x"] = round(pair["production"]["pages_per_s"] / pair["baseline_no_lru_per_url"]["pages_per_s"], 2)
        out["latency_sweep"][f"{ms:g}ms"] = pair
    out["same_new_urls"] = len({frozenset(v) for v in news.values()}) == 1
    out["new_urls"] = len(next(iter(news.values())))
    return out


def best_of(repeat: int, *args: Any, **kw: Any) -> tuple[dict[str, Any], set[str]]:
    """``measure`` once, and again up to ``repeat`` runs in all while a run is short; the fastest kept."""
    best, new = measure(*args, **kw)
    runs = 1
    while runs < repeat and best["wall_s"] < REPEAT_UNDER_S:
        again, new_again = measure(*args, **kw)
        if new_again != new:
            raise RuntimeError("two runs of one configuration found different new URLs")
        runs += 1
        if again["pages_per_s"] > best["pages_per_s"]:
            best = again
    best["runs"] = runs
    return best, new


def measure(rounds: list[list[Path]], rules: CrawlLinkRules, pages: int, *, host: str, port: int, latency_ms: float,
            lru_size: int, batch_size: int, work: Path) -> tuple[dict[str, Any], set[str]]:  # fmt: skip
    """Every round through the link pipeline into a fresh prefix behind a fresh delaying proxy."""
    prefix = f"cfs5{uuid.uuid4().hex[:8]}"
    new: set[str] = set()
    candidates = most = 0
    dedup: dict[str, int] = {}
    extract_s = update_s = 0.0
    proxy = ProxyProcess([Route("tcp", "127.0.0.1", 0, host, port, up_s=latency_ms / 1000.0)])
    try:
        HBaseStore(host, port, prefix=prefix).close()  # the tables, made directly (not timed, not delayed)
        (pport,) = proxy.start()
        shutil.rmtree(work, ignore_errors=True)
        pipe = LinkPipeline(RunnerConfig("inline", work_dir=work),
                            rules.job_args(store=f"hbase://127.0.0.1:{pport}/{prefix}", batch_size=batch_size,
                                           lru_size=lru_size))  # fmt: skip
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i, segs in enumerate(rounds):
            # Round ids in merge order, as `crawlfleet links` gives them: the store then counts in-links blind.
            res = pipe.process_many(segs, name=f"round-{i}", round_id=round_id(time.time_ns()))
            candidates += res.candidates
            most = max(most, res.candidates)
            new.update(rec["url"] for rec in res.new_pending)
            extract_s += res.extract_s
            update_s += res.update_s
            for name, n in res.counters.get("dedup", {}).items():
                dedup[name] = dedup.get(name, 0) + n
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        stats = proxy.stop()
        _drop(host, port, prefix)
        shutil.rmtree(work, ignore_errors=True)
    wire = stats[0] if stats else {}
    return {
        "latency_ms": latency_ms, "lru_size": lru_size, "batch_size": batch_size,
        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "pages_per_s": round(pages / wall, 1),
        "candidates_per_s": round(candidates / wall, 1), "candidates": candidates,
        "max_round_candidates": most, "new": len(new),
        "extract_s": round(extract_s, 2), "update_s": round(update_s, 2),
        "update_candidates_per_s": round(candidates / update_s, 1) if update_s > 0 else None,
        "store_calls": dedup.get("round_trips", 0), "remote_lookups": dedup.get("remote_lookups", 0),
        "local_hits": dedup.get("local_hits", 0), "inlink_updates": dedup.get("inlink_updates", 0),
        "thrift_connections": wire.get("connections"), "thrift_bytes_per_page": round(
            (wire.get("bytes_up", 0) + wire.get("bytes_down", 0)) / max(1, pages)),
    }, new  # fmt: skip


def _drop(host: str, port: int, prefix: str) -> None:
    store = HBaseStore(host, port, prefix=prefix)
    try:
        store.drop()
    finally:
        store.close()


# --- the segments -----------------------------------------------------------------------------------
def record_crawl(args: argparse.Namespace, work: Path, host: str, port: int) -> tuple[Path, CrawlLinkRules, dict[str, Any]]:
    """A fleet crawl of the testbed on the design card's loop: the directory of its nodes' segments (with
    the live rounds in ``ROUNDS_FILE``), its link rules, and what it did."""
    from pipeline.harness.faults.bed import Bed
    from pipeline.harness.faults.fleet import FleetRig
    from pipeline.harness.faults.services import broker_vhost

    prefix = f"cfs5crawl{uuid.uuid4().hex[:8]}"
    store = StoreSettings(kind="hbase", hbase_host=host, hbase_port=port, hbase_prefix=prefix)
    bed = Bed.start(args.hosts, args.pages, seed=args.seed, workdir=work / "tb")
    t0 = time.perf_counter()
    try:
        with broker_vhost() as url:
            rig = FleetRig(bed, url, work / "crawl", store=store, extra_env={"CRAWLFLEET_FLEET_LINK_PATH": "jobs"})
            try:
                for i in range(1, args.workers + 1):
                    rig.start_worker(i)
                rig.start_dispatcher()
                summary = rig.wait_dispatcher(timeout_s=args.timeout)
            finally:
                rig.close()
        hb = HBaseStore(host, port, prefix=prefix)
        try:
            text = hb.get_meta(RULES_KEY)
        finally:
            hb.close()
    finally:
        bed.close()
        _drop(host, port, prefix)  # the crawl's tables, also when it failed
    if not text:
        raise RuntimeError("the recording crawl left no link rules in its store")
    root = rig.out / "node-segments"
    live = [ev["names"] for ev in rig.events() if ev["ev"] == "links" and ev.get("names")]
    (root / ROUNDS_FILE).write_text(json.dumps(live))
    info = {"crawl": {"hosts": args.hosts, "pages_per_host": args.pages, "workers": args.workers,
                      "pages_fetched": summary.get("pages_fetched"), "wall_s": round(time.perf_counter() - t0, 1)}}  # fmt: skip
    return root, CrawlLinkRules.from_json(text), info


def recorded(root: Path) -> list[Path]:
    """Closed segments under ``root`` (``NODE/*.jsonl`` or ``.done/NODE/*.jsonl``), oldest first."""
    found = [*root.glob("*/*.jsonl"), *root.glob(f"{DONE_DIR}/*/*.jsonl")]
    if not found:
        raise FileNotFoundError(f"no segments under {root}")
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))


def rounds_of(root: Path, segments: list[Path], *, per_round: int) -> list[list[Path]]:
    """The live crawl's rounds (``ROUNDS_FILE``: segment names per ``links`` report) when ``per_round``
    is 0 and they were recorded, else ``per_round`` (4 when 0) segments at a time in closing order.
    Segments no recorded round names form a last round."""
    by_name = {f"{s.parent.name}/{s.name}": s for s in segments}
    path = root / ROUNDS_FILE
    if per_round == 0 and path.exists():
        rounds = [[by_name[n] for n in names if n in by_name] for names in json.loads(path.read_text())]
        rounds = [r for r in rounds if r]
        named = {p for r in rounds for p in r}
        rest = [s for s in segments if s not in named]
        return rounds + ([rest] if rest else [])
    n = per_round or 4
    return [segments[i : i + n] for i in range(0, len(segments), n)]


def keep(segments: list[Path], rounds: list[list[Path]], rules: CrawlLinkRules, dest: Path) -> None:
    """Copy the segments (mtimes kept, so the order is), the rounds and the rules to ``dest``."""
    for seg in segments:
        target = dest / seg.parent.name / seg.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(seg, target)
    (dest / ROUNDS_FILE).write_text(json.dumps([[f"{s.parent.name}/{s.name}" for s in r] for r in rounds]))
    (dest / RULES_FILE).write_text(rules.to_json())


def _read_rules(root: Path) -> CrawlLinkRules:
    path = root / RULES_FILE
    if path.exists():
        return CrawlLinkRules.from_json(path.read_text())
    return CrawlLinkRules(("crawl.test",), 12, 10_000)


def _lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())
