"""``crawlfleet bench scale --pages N``: does the embedded crawl stay flat and bounded as it grows?

Crawls a lazily generated testbed of about N pages (sqrt(N) hosts x sqrt(N) pages) and samples, once a
second: pages done, RSS, frontier size (pending, and how many of those are held in RAM), frontier RAM
bytes, store bytes on disk, and the crawl process's CPU seconds. The samples are reported per decile
of progress.

The issue's baseline is the rate at 10k pages. It is measured in the same run: a ``--baseline-pages``
crawl before the big one and another after it, so that a change of machine load during a long run
shows as a difference between the two. Both wall rate and CPU per page are compared: on a shared
machine the wall rate moves with other people's load, the CPU time per page much less.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from pipeline.crawl import gcpolicy
from pipeline.crawl.core import CrawlCore
from pipeline.frontier import footprint
from pipeline.harness.bench.common import testbed_crawl_settings
from pipeline.harness.testbed.harness import TestbedProcess


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pages", type=int, default=10_000, help="pages of the large crawl (the 10k baseline runs before and after it)")
    p.add_argument("--seed", type=int, default=11, help="seed of the testbed's (or the simulation's) random web")
    p.add_argument("--out", default="", help="keep the crawl directories and logs here (default: a temporary directory, deleted)")
    p.add_argument("--keep", action="store_true", help="keep the crawl directory")
    p.add_argument("--baseline-pages", type=int, default=10_000,
                   help="crawl this many pages before and after the main crawl, as the same-run baseline "
                        "(0: none; also none when --pages is not larger)")  # fmt: skip


def _helpers(proc: psutil.Process) -> list[psutil.Process]:
    """The crawl's live parse and fetch processes (pipeline/embedded/parseproc.py, fetchproc.py), not the testbed."""
    out = []
    for child in proc.children():
        try:
            if any(m in " ".join(child.cmdline()) for m in ("pipeline.embedded.parsechild", "pipeline.embedded.fetchchild")):
                out.append(child)
        except psutil.Error:
            continue
    return out


def _crawl_cpu(proc: psutil.Process, helpers: list[psutil.Process]) -> tuple[float, float]:
    """(user + system, system) CPU seconds of the crawl: this process, its reaped children, and its live
    ``helpers``; the testbed it also runs is neither reaped nor a helper while the crawl runs."""
    t = proc.cpu_times()
    total, system = t.user + t.system + t.children_user + t.children_system, t.system + t.children_system
    for child in helpers:
        try:
            ct = child.cpu_times()
        except psutil.Error:  # gone meanwhile: its time is in children_* from the next sample on
            continue
        total, system = total + ct.user + ct.system, system + ct.system
    return total, system


def _rss(helpers: list[psutil.Process]) -> int:
    total = 0
    for child in helpers:
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
    return total


def _disk_bytes(out: Path) -> int:
    total = 0
    for path in out.rglob("*"):
        if path.is_file():
            total += path.stat().st_size
    return total


def run(args: argparse.Namespace) -> dict[str, Any]:
    base_n = args.baseline_pages if 0 < args.baseline_pages < args.pages else 0
    if not base_n:
        return _measure(args, args.pages)
    before = _measure(args, base_n, label="baseline before")
    result = _measure(args, args.pages)
    after = _measure(args, base_n, label="baseline after")
    result["baseline"] = {"pages": base_n, "before": _brief(before), "after": _brief(after)}
    base_rate = (before["pages_per_s"] + after["pages_per_s"]) / 2
    base_cpu = (before["cpu_ms_per_page"] + after["cpu_ms_per_page"]) / 2
    result["rate_vs_baseline"] = round(result["pages_per_s"] / base_rate, 3) if base_rate else None
    result["cpu_per_page_vs_baseline"] = round(result["cpu_ms_per_page"] / base_cpu, 3) if base_cpu else None
    return result


def _brief(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("pages", "elapsed_s", "pages_per_s", "cpu_ms_per_page", "sys_ms_per_page", "peak_rss_mib")
    return {k: r[k] for k in keys}


def _measure(args: argparse.Namespace, pages: int, *, label: str = "") -> dict[str, Any]:
    from pipeline.embedded.engine import CrawlRequest, EmbeddedCrawl
    from pipeline.observe.progress import CrawlProgress
    from pipeline.observe.stats import CrawlStats

    side = max(2, round(math.sqrt(pages)))
    workdir = Path(args.out or tempfile.mkdtemp(prefix="bench-scale-"))
    proc = psutil.Process(os.getpid())
    samples: list[dict[str, float]] = []
    t0 = time.monotonic()

    def on_tick(core: CrawlCore, _row: dict[str, Any] | None) -> None:
        fr = core.frontier
        helpers = _helpers(proc)
        cpu, system = _crawl_cpu(proc, helpers)
        samples.append({
            "t": time.monotonic() - t0,
            "pages": core.stats.pages + core.stats.failed,
            "rss": proc.memory_info().rss,
            "helpers_rss": _rss(helpers),
            "disk": _disk_bytes(out),
            "cpu": cpu,
            "sys": system,
            "pending": fr.pending,
            "in_ram": fr.in_ram(),
            "frontier_bytes": footprint.ram_bytes(fr),
            "queue_bytes": footprint.queue_bytes(fr),
            "hosts": len(fr),
            "active_hosts": fr.active,
            "lru": len(core.seen),
            "table_bytes": core.seen.table.nbytes if core.seen.table is not None else 0,
            "table_urls": len(core.seen.table) if core.seen.table is not None else 0,
        })

    with TestbedProcess(side, side, seed=args.seed, workdir=workdir / "testbed") as tb:
        settings = testbed_crawl_settings(tb)
        out = workdir / "crawl"
        shutil.rmtree(out, ignore_errors=True)
        import asyncio

        stats = CrawlStats()
        bar = CrawlProgress(stats, desc=f"bench scale {label or pages}")

        def tick(core: CrawlCore, row: dict[str, Any] | None) -> None:
            on_tick(core, row)
            bar.update()

        crawl = EmbeddedCrawl(settings, CrawlRequest(list(tb.seeds), out), stats=stats, on_tick=tick)
        gcpolicy.tune_for_crawl()  # as `crawlfleet crawl` does (pipeline/embedded/cli.py)
        cpu0, sys0 = _crawl_cpu(proc, [])
        with bar:
            summary = asyncio.run(crawl.run())
        cpu_end, sys_end = _crawl_cpu(proc, [])  # the helpers are reaped by now
        cpu, sys_s = cpu_end - cpu0, sys_end - sys0
        disk = _disk_bytes(out)
    result = _deciles(samples, summary, disk, cpu0)
    done = max(1, summary["pages_fetched"] + summary["pages_failed"])
    result["cpu_ms_per_page"] = round(1000 * cpu / done, 3)
    result["sys_ms_per_page"] = round(1000 * sys_s / done, 3)  # kernel share of cpu_ms_per_page
    result["testbed"] = {"hosts": side, "pages_per_host": side}
    if not args.keep:
        shutil.rmtree(workdir / "crawl", ignore_errors=True)
    return result


def _deciles(samples: list[dict[str, float]], summary: dict[str, Any], disk: int, cpu0: float) -> dict[str, Any]:
    total = max(1, summary["pages_fetched"] + summary["pages_failed"])
    rows = []
    prev_t, prev_p, prev_cpu = 0.0, 0.0, cpu0
    prev_sys = samples[0]["sys"] if samples else 0.0
    for d in range(1, 11):
        target = total * d / 10
        at = next((s for s in samples if s["pages"] >= target), samples[-1] if samples else None)
        if at is None:
            break
        dt, dp = at["t"] - prev_t, at["pages"] - prev_p
        rows.append({
            "decile": d,
            "pages_per_s": round(dp / dt, 1) if dt > 0 else None,
            "cpu_ms_per_page": round(1000 * (at["cpu"] - prev_cpu) / dp, 3) if dp > 0 else None,
            "sys_ms_per_page": round(1000 * (at["sys"] - prev_sys) / dp, 3) if dp > 0 else None,
            "rss_mib": round(at["rss"] / 2**20, 1),
            "helpers_rss_mib": round(at.get("helpers_rss", 0) / 2**20, 1),
            "frontier_pending": int(at["pending"]),
            "frontier_in_ram": int(at["in_ram"]),
            "frontier_hosts": int(at["hosts"]),
            "frontier_active_hosts": int(at.get("active_hosts", 0)),
            "frontier_bytes_per_url_in_ram": round(at["queue_bytes"] / at["in_ram"], 1) if at["in_ram"] else None,
            "frontier_bytes_per_queued_url_incl_hosts": (
                round(at["frontier_bytes"] / at["pending"], 1) if at["pending"] else None
            ),
            "seen_table_mib": round(at.get("table_bytes", 0) / 2**20, 1),
            "store_bytes_per_page": round(at["disk"] / at["pages"], 1) if at.get("disk") and at["pages"] else None,
            "seen_table_bytes_per_url": round(at["table_bytes"] / at["table_urls"], 1) if at.get("table_urls") else None,
        })
        prev_t, prev_p, prev_cpu, prev_sys = at["t"], at["pages"], at["cpu"], at["sys"]
    rates = [r["pages_per_s"] for r in rows if r["pages_per_s"]]
    mid = rates[1:-1] or rates  # the first and last deciles hold ramp-up and drain
    return {
        "pages": summary["pages_fetched"],
        "elapsed_s": summary["elapsed_s"],
        "pages_per_s": summary["pages_per_s"],
        "deciles": rows,
        "steady_rate_last_to_first": round(mid[-1] / mid[0], 3) if mid else None,
        "peak_rss_mib": round(max(s["rss"] for s in samples) / 2**20, 1) if samples else None,
        # the parse (or fetch) processes beside the crawl's own
        "peak_helpers_rss_mib": round(max(s.get("helpers_rss", 0) for s in samples) / 2**20, 1) if samples else None,
        "max_frontier_bytes_per_url_in_ram": max(
            (r["frontier_bytes_per_url_in_ram"] for r in rows if r["frontier_bytes_per_url_in_ram"]), default=None
        ),
        "store_bytes_per_page": round(disk / max(1, summary["pages_fetched"]), 1),
        "frontier_host_overhead_bytes": 400,
        "goal": "rate at 1M within 15% of 10k; <= 64 B per URL held in RAM; RSS bounded",
    }
