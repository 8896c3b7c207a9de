"""``crawlfleet crawl``: the embedded default, one command, no services."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pipeline.crawl.flags import add_crawl_flags, settings_from_args
from pipeline.observe import logs
from pipeline.settings import Settings


def run_crawl(settings: Settings, seeds: list[str], out: Path, *, resume: bool, progress: bool) -> dict[str, Any]:
    from pipeline.embedded.engine import CrawlRequest, EmbeddedCrawl, install_signal_handlers
    from pipeline.observe.progress import CrawlProgress
    from pipeline.observe.stats import CrawlStats

    stats = CrawlStats()
    bar = CrawlProgress(stats, total=settings.scope.max_pages or None, mode="auto" if progress else "off")

    async def main() -> dict[str, Any]:
        crawl = EmbeddedCrawl(
            settings, CrawlRequest(seeds, out, resume=resume), stats=stats, on_tick=lambda _core, _row: bar.update()
        )
        install_signal_handlers(crawl)
        return await crawl.run()

    from pipeline.crawl import gcpolicy

    gcpolicy.tune_for_crawl()  # this process is the crawl from here on (see gcpolicy for the numbers)
    with bar:
        return asyncio.run(main())


def print_summary(summary: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, sort_keys=True))
        return
    keys = ("pages_fetched", "pages_failed", "urls_discovered", "robots_blocked", "elapsed_s", "pages_per_s")
    print("crawl summary")
    for key in keys:
        print(f"  {key:16} {summary.get(key)}")
    errors = summary.get("errors_by_class") or {}
    if errors:
        print("  errors:         " + ", ".join(f"{k}={v}" for k, v in sorted(errors.items())))


def _cmd_crawl(args: argparse.Namespace) -> int:
    logs.setup_from_args(args)
    seeds = list(args.seeds)
    if args.seeds_file:
        seeds += [ln.strip() for ln in Path(args.seeds_file).read_text().splitlines() if ln.strip()]
    if not seeds and not args.resume:
        print("crawl: give at least one seed URL (or --resume)", file=sys.stderr)
        return 2
    out = Path(args.out)
    if not args.resume and (out / "crawl.db").exists():
        print(f"crawl: {out} holds a crawl already; use --resume to continue it or another --out", file=sys.stderr)
        return 2
    settings = settings_from_args(args)
    summary = run_crawl(settings, seeds, out, resume=args.resume, progress=not args.no_progress)
    print_summary(summary, as_json=args.json)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    crawl = sub.add_parser("crawl", help="crawl from seed URLs on the embedded default (no services)")
    crawl.add_argument("seeds", nargs="*", metavar="SEED_URL")
    crawl.add_argument("--seeds-file")
    crawl.add_argument("--resume", action="store_true", help="continue the crawl in --out without refetching")
    add_crawl_flags(crawl)
    crawl.set_defaults(func=_cmd_crawl)
