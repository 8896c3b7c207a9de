"""``crawlfleet bench jobs``: link extraction per runner, and S5's local dedup cache.

Part ``extract``: ``--pages`` synthetic pages (~20 KB, ~20 links each, 5% errors) written as segments of
``--segment-pages`` (a node's batch) go through ``mr_extract_links`` on each of ``--runners``, for each of
``--inputs``: ``segments`` (manifests naming whole segments: one mapper call per segment, #18) and
``pages`` (the segment files as input: one mapper call per page, as before #18). Baseline: the same logic
functions called in a plain loop (``bare``), no mrjob. CPU is user+sys of the whole process tree, JVMs and
Python workers included, from a cpuacct cgroup (treecpu.py; rusage misses processes nobody reaps); on
YARN (and on a Spark master) the tasks run in the cluster's containers, outside that tree, so the CPU of
the cluster's processes during the run is added (clustercpu.py, as the fleet bench counts it; the row's
``cluster_cpu`` says how much, by service, the daemons' own share included).
Figures: wall pages/s, pages per CPU-second, both as ratios to bare, CPU per page as a multiple of bare's,
and for segments a start-up run on one segment, so the marginal CPU per page leaves start-up out.

Part ``s5``: the candidate stream of the same pages in crawl order (hosts interleaved, navigation
links repeating on every page of a host) is merged into a fresh SQLite crawl db through
``SeenFilter``. Remote look-ups and round trips are counted without the LRU and with it at several
sizes (goal: >= 4x fewer remote look-ups). Then the store is wrapped to sleep ``--latency-ms`` per
round trip (a remote seen-set) and crawl throughput (extract + filter + dedup per page) is measured
for S5's baseline (one round trip per URL, no cache) and with the cache and/or batching; S5 reports
~4x with both of its optimisations at 10 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from fetchers.records import FetchResult
from jobs import logic
from jobs.jobrun import run_job
from jobs.mr_extract_links import MRExtractLinks
from jobs.runner import extract_links
from jobs.runnerconfig import RunnerConfig
from jobs.synth import make_results, write_segment
from pipeline.frontier.dedup import SeenFilter
from pipeline.harness.bench import clustercpu
from pipeline.harness.bench.linkcpu import bare_links
from pipeline.harness.bench.treecpu import TreeCpu
from pipeline.links import extract, hrefs
from pipeline.storage.base import Store, UrlRecord
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import join, normalize

S5_CLAIM = "~4x throughput with the local dedup cache + large-granularity transfer (3 nodes, 10 ms latency)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parts", default="hotpath,extract,s5", help="comma list of hotpath, extract, s5")
    parser.add_argument("--pages", type=int, default=10_000, help="pages in the synthetic segment")
    parser.add_argument("--hosts", type=int, default=20, help="hosts in the synthetic segment")
    parser.add_argument("--runners", default="inline,local,spark", help="comma list; hadoop also works")
    parser.add_argument("--segment-pages", type=int, default=1000, help="pages per segment file (a node's batch)")
    parser.add_argument("--inputs", default="segments,pages",
                        help="comma list: segments (one mapper call per segment), pages (one per page, as before #18)")
    parser.add_argument("--lru-sizes", default="1000,10000,100000", help="comma list of S5 LRU sizes to try")
    parser.add_argument("--batch-size", type=int, default=500, help="URLs per round trip when batching")
    parser.add_argument("--latency-ms", type=float, default=10.0, help="added per store round trip")
    parser.add_argument("--latency-pages", type=int, default=150, help="pages in each latency run")
    parser.add_argument("--work-dir", type=Path, default=None, help="mrjob work space (default: a temporary directory)")


def machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results = list(make_results(args.pages, hosts=args.hosts, seed=1))
    per = max(1, args.segment_pages)
    segments = [work / f"segment-{i // per:05d}.jsonl" for i in range(0, len(results), per)]
    for i, seg in enumerate(segments):
        write_segment(seg, results[i * per : (i + 1) * per])
    out: dict[str, Any] = {
        "machine": machine(),
        "segment": {"pages": args.pages, "hosts": args.hosts, "segments": len(segments), "pages_per_segment": per,
                    "bytes": sum(s.stat().st_size for s in segments),
                    "generate_s": round(time.perf_counter() - started, 2)},
    }  # fmt: skip
    parts = set(args.parts.split(","))
    rules = logic.LinkRules.build(allowed_domains=("crawl.test",), max_depth=10)
    if "hotpath" in parts:
        out["hotpath"] = bench_hotpath(results)
    if "extract" in parts:
        cpu = TreeCpu()
        try:
            out["extract"] = bench_extract(segments, args.pages, rules, args.runners.split(","), work,
                                           inputs=args.inputs.split(","), cpu=cpu)  # fmt: skip
        finally:
            cpu.close()
    if "s5" in parts:
        out["s5"] = bench_s5(results, rules, args, work)
    return out


# --- extract() on one page ----------------------------------------------------------------------


def naive_extract(body: bytes, base: str) -> list[tuple[str, str]]:
    """The straightforward version: parse, then urls.join + urls.normalize for every href."""
    out = []
    for node in LexborHTMLParser(body).css("a[href], area[href]"):
        url = normalize(join(base, node.attributes.get("href") or ""))
        if url:
            out.append((url, node.text(deep=True, separator=" ", strip=True)))
    return out


def bench_hotpath(results: Sequence[FetchResult], *, pages: int = 500, rounds: int = 5) -> dict[str, Any]:
    """Microseconds per page for ``extract.extract`` (cold and warm normalize cache) against the naive loop.

    Best of ``rounds`` passes over the same ``pages`` OK pages, timed in CPU time of this thread
    (``time.thread_time``), so other load on a shared machine inflates the figures less.
    """
    sample = [(r.body, r.final_url) for r in results if r.ok][:pages]
    avg_bytes = sum(len(b) for b, _ in sample) // max(1, len(sample))
    avg_links = sum(len(extract.extract(b, base_url=u).links) for b, u in sample) / max(1, len(sample))

    def best(fn: Any, *, cold: bool = False) -> float:
        times = []
        for _ in range(rounds):
            if cold:
                hrefs._normalize_cached.cache_clear()
            t0 = time.thread_time()
            for body, url in sample:
                fn(body, url)
            times.append((time.thread_time() - t0) / len(sample) * 1e6)
        return round(min(times), 1)

    naive = best(naive_extract)
    cold = best(lambda b, u: extract.extract(b, base_url=u), cold=True)
    warm = best(lambda b, u: extract.extract(b, base_url=u))
    parse = best(lambda b, u: LexborHTMLParser(b))
    return {
        "pages": len(sample), "avg_page_bytes": avg_bytes, "avg_links": round(avg_links, 1),
        "naive_us": naive, "extract_cold_cache_us": cold, "extract_warm_cache_us": warm, "parse_only_us": parse,
        "speedup_cold_x": round(naive / cold, 2), "speedup_warm_x": round(naive / warm, 2),
        "target_us": 150,
    }  # fmt: skip


# --- extraction per runner ----------------------------------------------------------------------


def bench_extract(segments: Sequence[Path], pages: int, rules: logic.LinkRules, runners: Sequence[str],
                  work: Path, *, inputs: Sequence[str], cpu: TreeCpu) -> dict[str, Any]:  # fmt: skip
    """Each runner on each input kind, against the bare loop; every figure from ``cpu`` (see treecpu.py).

    ``segments``: manifests naming whole segments (one mapper call per segment, the product's way since
    #18); ``pages``: the segment files as the job's input, one page per mapper call (the way before).
    ``startup``: the runner on the first segment alone, whose CPU is what a run costs besides its pages;
    ``marginal_pages_per_cpu_s`` leaves it out."""
    res: dict[str, Any] = {"cpu_counted_by": cpu.method}
    cpu0, t0 = cpu.seconds(), time.perf_counter()
    _, records = bare_links((_lines(segment) for segment in segments), rules)
    base = res["bare"] = _rates(pages, time.perf_counter() - t0, cpu.seconds() - cpu0, cores=1)
    base["records"] = records
    args = ["--allowed-domain", "crawl.test", "--max-depth", "10"]
    first_pages = sum(1 for _ in open(segments[0], "rb"))  # noqa: SIM115 - counted once, closed by GC
    for runner in runners:
        for kind in inputs:
            cfg = RunnerConfig(runner=runner, work_dir=work / f"work-{runner}-{kind}")
            row = res[f"{runner}/{kind}"] = _run_extract(segments, pages, kind, args, cfg, cpu)
            if "error" in row:
                continue
            row["same_output_as_bare"] = row["records"] == records
            if kind == "segments" and runner in ("spark", "hadoop", "local"):
                small = _run_extract(segments[:1], first_pages, kind, args, cfg, cpu)
                row["startup_cpu_s"] = small.get("cpu_s")
                if small.get("cpu_s") is not None and pages > first_pages:
                    marginal = (row["cpu_s"] - small["cpu_s"]) / (pages - first_pages)
                    row["marginal_pages_per_cpu_s"] = round(1 / marginal, 1) if marginal > 0 else None
    for row in res.values():
        if isinstance(row, dict) and row.get("pages_per_s"):
            row["ratio_wall_vs_bare"] = round(row["pages_per_s"] / base["pages_per_s"], 3)
            row["ratio_per_cpu_s_vs_bare"] = round(row["pages_per_cpu_s"] / base["pages_per_cpu_s"], 3)
            row["cpu_per_page_x_bare"] = round(base["pages_per_cpu_s"] / row["pages_per_cpu_s"], 2)
            if row.get("marginal_pages_per_cpu_s"):
                row["marginal_cpu_per_page_x_bare"] = round(base["pages_per_cpu_s"] / row["marginal_pages_per_cpu_s"], 2)
    return res


def _lines(segment: Path) -> Iterable[bytes]:
    with open(segment, "rb") as fh:
        yield from fh


def _run_extract(segments: Sequence[Path], pages: int, kind: str, args: list[str], cfg: RunnerConfig,
                 cpu: TreeCpu) -> dict[str, Any]:  # fmt: skip
    leftovers = cpu.settle()  # the previous run's stragglers must not charge this one
    # On YARN (or a Spark master) the tasks run in the cluster's containers, outside this process tree:
    # their CPU and the daemons' is counted from the cluster's processes, as the fleet bench does.
    on_cluster = cfg.runner == "hadoop" or (cfg.runner == "spark" and not cfg.spark_master.startswith("local"))
    cluster0 = clustercpu.sample() if on_cluster else None
    cpu0, t0 = cpu.seconds(), time.perf_counter()
    try:
        if kind == "segments":
            job = extract_links(segments, args, cfg)
        else:
            job = run_job(MRExtractLinks, segments, args, cfg)
    except Exception as exc:  # noqa: BLE001 - a missing runner is reported, not fatal
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    wall = time.perf_counter() - t0
    stragglers = cpu.settle()  # Spark's Python daemon may still be exiting: its CPU belongs to this run
    used = cpu.seconds() - cpu0
    cluster = clustercpu.sample().minus(cluster0) if cluster0 is not None else None
    if cluster is not None:
        used += cluster.total_s
    cores = 1 if cfg.runner == "inline" else min(2, os.cpu_count() or 1)
    row = _rates(pages, wall, used, cores=cores)
    row.update(records=len(job), segments=len(segments), leftovers_before=leftovers,
               stragglers_after=stragglers)  # fmt: skip
    if cluster is not None:  # included in cpu_s: the containers' and the daemons' CPU during the run
        row["cluster_cpu"] = cluster.to_json(pages)
    return row


def _rates(pages: int, wall: float, cpu: float, *, cores: int) -> dict[str, Any]:
    return {
        "pages": pages, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "cores": cores,
        "pages_per_s": round(pages / wall, 1),
        "pages_per_s_per_core": round(pages / wall / cores, 1),
        "pages_per_cpu_s": round(pages / cpu, 1) if cpu > 0 else None,
    }  # fmt: skip


# --- S5: local dedup cache ----------------------------------------------------------------------


class DelayedStore:
    """A Store stand-in for a remote seen-set: every add_urls call (one round trip) sleeps first."""

    def __init__(self, inner: Store, delay_s: float) -> None:
        self.inner = inner
        self.delay_s = delay_s
        self.calls = 0

    def add_urls(self, records: Sequence[UrlRecord], *, count_inlinks: bool = True) -> list[UrlRecord]:
        self.calls += 1
        time.sleep(self.delay_s)
        return self.inner.add_urls(records, count_inlinks=count_inlinks)


def candidate_stream(results: Sequence[FetchResult], rules: logic.LinkRules) -> list[list[UrlRecord]]:
    """Per page, in crawl order: the records the filter passes (what the update step looks up)."""
    return [[c.to_record() for c in logic.page_candidates(r, rules)] for r in results]


def count_lookups(stream: Sequence[Sequence[UrlRecord]], store: Store, *, lru_size: int,
                  batch_size: int) -> dict[str, Any]:
    """Feed the stream in batches of ``batch_size`` URLs (0 = one batch per page)."""
    seen = SeenFilter(store, lru_size=lru_size)
    new = _feed(seen, stream, batch_size)
    s = seen.stats
    return {"lookups": sum(len(p) for p in stream), "new": new, "remote_lookups": s.remote_lookups,
            "round_trips": s.round_trips, "local_hits": s.local_hits}


def bench_s5(results: Sequence[FetchResult], rules: logic.LinkRules, args: argparse.Namespace,
             work: Path) -> dict[str, Any]:
    stream = candidate_stream(results, rules)
    out: dict[str, Any] = {"s5_claim": S5_CLAIM, "lookups": sum(len(p) for p in stream)}
    sizes = [int(x) for x in args.lru_sizes.split(",") if x]
    counts: dict[str, Any] = {}
    for label, lru, batch in [("no_lru_per_url", 0, 1), ("no_lru_batched", 0, args.batch_size),
                              *[(f"lru_{n}_per_url", n, 1) for n in sizes],
                              *[(f"lru_{n}_batched", n, args.batch_size) for n in sizes]]:
        with SqliteStore(work / f"s5-{label}.db") as store:
            counts[label] = count_lookups(stream, store, lru_size=lru, batch_size=batch)
    base = counts["no_lru_per_url"]
    for c in counts.values():
        c["fewer_remote_lookups_x"] = round(base["remote_lookups"] / max(1, c["remote_lookups"]), 2)
        c["fewer_round_trips_x"] = round(base["round_trips"] / max(1, c["round_trips"]), 2)
    assert len({c["new"] for c in counts.values()}) == 1, "every configuration must find the same new URLs"
    out["counts"] = counts
    out["latency"] = bench_latency(results, stream, rules, args, work, max(sizes))
    return out


def bench_latency(results: Sequence[FetchResult], stream: Sequence[Sequence[UrlRecord]],
                  rules: logic.LinkRules, args: argparse.Namespace, work: Path, lru_size: int) -> dict[str, Any]:
    """Pages/s of extract + filter + dedup with ``--latency-ms`` per store round trip.

    A crawl in progress, not a cold start: each run first merges the candidates of all but the last
    ``--latency-pages`` pages with no delay, in large batches whatever the configuration (so store
    and cache are warm and warming is cheap), then the delay is switched on and the last pages are
    processed for real (extraction included). Runs shorter than 5 s are repeated (best of 3): the
    machine is shared and the fast configurations are otherwise mostly CPU noise.
    """
    n = min(args.latency_pages, len(results))
    warm, measured = stream[: len(results) - n], results[len(results) - n :]
    configs = [("s5_baseline_per_url_no_lru", 0, 1), ("per_url_lru", lru_size, 1),
               ("per_page_no_lru", 0, 0), ("per_page_lru", lru_size, 0),
               ("batched_no_lru", 0, args.batch_size), ("batched_lru", lru_size, args.batch_size)]
    out: dict[str, Any] = {"latency_ms": args.latency_ms, "pages": n, "warm_pages": len(warm)}
    for label, lru, batch in configs:
        best: dict[str, Any] | None = None
        for attempt in range(3):
            db = work / f"lat-{label}-{attempt}.db"
            with SqliteStore(db) as inner:
                store = DelayedStore(inner, 0.0)
                seen = SeenFilter(store, lru_size=lru)  # type: ignore[arg-type]
                _feed(seen, warm, 5000)
                store.delay_s, store.calls, before = args.latency_ms / 1000.0, 0, seen.remote_lookups
                t0 = time.perf_counter()
                _feed(seen, ([c.to_record() for c in logic.page_candidates(r, rules)] for r in measured), batch)
                wall = time.perf_counter() - t0
            run = {"pages_per_s": round(n / wall, 1), "round_trips": store.calls,
                   "remote_lookups": seen.remote_lookups - before}
            if best is None or run["pages_per_s"] > best["pages_per_s"]:
                best = run
            if wall > 5.0:
                break
        out[label] = best
    base = out["s5_baseline_per_url_no_lru"]["pages_per_s"]
    for label, _, _ in configs:
        out[label]["throughput_x"] = round(out[label]["pages_per_s"] / base, 2)
    return out


def _feed(seen: SeenFilter, pages: Iterable[Sequence[UrlRecord]], batch: int) -> int:
    """Merge per-page record lists, ``batch`` URLs per call (0: one call per page); returns new URLs."""
    new = 0
    buf: list[UrlRecord] = []
    for recs in pages:
        if batch == 0:
            new += len(seen.add_new(recs))
            continue
        for rec in recs:
            buf.append(rec)
            if len(buf) >= batch:
                new += len(seen.add_new(buf))
                buf = []
    if buf:
        new += len(seen.add_new(buf))
    return new
