"""``crawlfleet bench scale --pages N``: does the embedded crawl stay flat and bounded as it grows?

Crawls a lazily generated testbed of about N pages (sqrt(N) hosts x sqrt(N) pages) and samples, once a
second: pages done, RSS, frontier size (pending, and how many of those are held in RAM), frontier RAM
bytes, store bytes on disk. The samples are reported per decile of progress. The baseline for the
"flat throughput" claim is the first decile's rate in the same run (the issue compares 1M to 10k;
run the bench at both sizes to get that ratio too).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from pipeline.bench.common import testbed_crawl_settings
from pipeline.core import CrawlCore
from pipeline.testbed.harness import TestbedProcess


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pages", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--out", default="")
    p.add_argument("--keep", action="store_true", help="keep the crawl directory")


def _disk_bytes(out: Path) -> int:
    total = 0
    for path in out.rglob("*"):
        if path.is_file():
            total += path.stat().st_size
    return total


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pipeline.engine import CrawlRequest, EmbeddedCrawl
    from pipeline.progress import CrawlProgress
    from pipeline.stats import CrawlStats

    side = max(2, round(math.sqrt(args.pages)))
    workdir = Path(args.out or tempfile.mkdtemp(prefix="bench-scale-"))
    proc = psutil.Process(os.getpid())
    samples: list[dict[str, float]] = []
    t0 = time.monotonic()

    def on_tick(core: CrawlCore, _row: dict[str, Any] | None) -> None:
        fr = core.frontier
        samples.append({
            "t": time.monotonic() - t0,
            "pages": core.stats.pages + core.stats.failed,
            "rss": proc.memory_info().rss,
            "pending": fr.pending,
            "in_ram": fr.in_ram(),
            "frontier_bytes": fr.ram_bytes(),
            "queue_bytes": fr.queue_bytes(),
            "hosts": len(fr),
            "lru": len(core.seen),
        })

    with TestbedProcess(side, side, seed=args.seed, workdir=workdir / "testbed") as tb:
        settings = testbed_crawl_settings(tb)
        out = workdir / "crawl"
        shutil.rmtree(out, ignore_errors=True)
        import asyncio

        stats = CrawlStats()
        bar = CrawlProgress(stats, desc=f"bench scale {args.pages}")

        def tick(core: CrawlCore, row: dict[str, Any] | None) -> None:
            on_tick(core, row)
            bar.update()

        crawl = EmbeddedCrawl(settings, CrawlRequest(list(tb.seeds), out), stats=stats, on_tick=tick)
        with bar:
            summary = asyncio.run(crawl.run())
        disk = _disk_bytes(out)
    result = _deciles(samples, summary, disk)
    result["testbed"] = {"hosts": side, "pages_per_host": side}
    if not args.keep:
        shutil.rmtree(workdir / "crawl", ignore_errors=True)
    return result


def _deciles(samples: list[dict[str, float]], summary: dict[str, Any], disk: int) -> dict[str, Any]:
    total = max(1, summary["pages_fetched"] + summary["pages_failed"])
    rows = []
    prev_t, prev_p = 0.0, 0.0
    for d in range(1, 11):
        target = total * d / 10
        at = next((s for s in samples if s["pages"] >= target), samples[-1] if samples else None)
        if at is None:
            break
        dt, dp = at["t"] - prev_t, at["pages"] - prev_p
        rows.append({
            "decile": d,
            "pages_per_s": round(dp / dt, 1) if dt > 0 else None,
            "rss_mib": round(at["rss"] / 2**20, 1),
            "frontier_pending": int(at["pending"]),
            "frontier_in_ram": int(at["in_ram"]),
            "frontier_hosts": int(at["hosts"]),
            "frontier_bytes_per_url_in_ram": round(at["queue_bytes"] / at["in_ram"], 1) if at["in_ram"] else None,
            "frontier_bytes_per_queued_url_incl_hosts": (
                round(at["frontier_bytes"] / at["pending"], 1) if at["pending"] else None
            ),
        })
        prev_t, prev_p = at["t"], at["pages"]
    rates = [r["pages_per_s"] for r in rows if r["pages_per_s"]]
    mid = rates[1:-1] or rates  # the first and last deciles hold ramp-up and drain
    return {
        "pages": summary["pages_fetched"],
        "elapsed_s": summary["elapsed_s"],
        "pages_per_s": summary["pages_per_s"],
        "deciles": rows,
        "steady_rate_last_to_first": round(mid[-1] / mid[0], 3) if mid else None,
        "peak_rss_mib": round(max(s["rss"] for s in samples) / 2**20, 1) if samples else None,
        "max_frontier_bytes_per_url_in_ram": max(
            (r["frontier_bytes_per_url_in_ram"] for r in rows if r["frontier_bytes_per_url_in_ram"]), default=None
        ),
        "store_bytes_per_page": round(disk / max(1, summary["pages_fetched"]), 1),
        "frontier_host_overhead_bytes": 400,
        "goal": "rate at 1M within 15% of 10k; <= 64 B per URL held in RAM; RSS bounded",
    }
