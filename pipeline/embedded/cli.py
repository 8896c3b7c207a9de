"""``crawlfleet crawl``: the embedded default, one command, no services."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fetchers import loops
from fetchers.choice import DEFAULT as DEFAULT_FETCHER
from fetchers.choice import KINDS
from pipeline.crawl.flags import add_crawl_flags
from pipeline.observe import logs
from pipeline.plugins.chain import PluginSet
from pipeline.settings import Settings


def run_crawl(
    settings: Settings, seeds: list[str], out: Path, *, resume: bool, progress: bool, fetcher: str = DEFAULT_FETCHER,
    plugins: PluginSet | None = None,
) -> dict[str, Any]:
    from pipeline.embedded.engine import CrawlRequest, EmbeddedCrawl, install_signal_handlers
    from pipeline.observe.progress import CrawlProgress
    from pipeline.observe.stats import CrawlStats

    stats = CrawlStats()
    bar = CrawlProgress(stats, total=settings.scope.max_pages or None, mode="auto" if progress else "off")

    async def main() -> dict[str, Any]:
        crawl = EmbeddedCrawl(
            settings, CrawlRequest(seeds, out, resume=resume, fetcher=fetcher), stats=stats,
            on_tick=lambda _core, _row: bar.update(), plugins=plugins,
        )
        install_signal_handlers(crawl)
        summary = await crawl.run()
        summary["event_loop"] = loops.running_kind()
        return summary

    from pipeline.crawl import gcpolicy

    gcpolicy.tune_for_crawl()  # this process is the crawl from here on (see gcpolicy for the numbers)
    with bar:
        return loops.run(main(), settings.fetch.event_loop)


def print_summary(summary: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, sort_keys=True))
        return
    keys = ("pages_fetched", "pages_failed", "urls_discovered", "robots_blocked", "elapsed_s", "pages_per_s")
    print("crawl summary")
    for key in keys:
        print(f"  {key:16} {summary.get(key)}")
    if summary.get("interrupted"):
        print(f"  {'interrupted':16} yes (abandoned in flight: {len(summary.get('abandoned') or [])})")
    items = summary.get("items")
    if items:
        print(f"  {'items':16} {items['items']} from {items['pages']} pages; plugin errors {items['errors']}")
    errors = summary.get("errors_by_class") or {}
    if errors:
        print("  errors:         " + ", ".join(f"{k}={v}" for k, v in sorted(errors.items())))


def _cmd_crawl(args: argparse.Namespace) -> int:
    from pipeline.embedded.start import plan
    from pipeline.observe.verdict import held_by_cap, nothing_due, zero_pages

    logs.setup_from_args(args)
    todo = plan(args)  # every input checked (UsageError: exit 2) before anything is created
    if todo.stop:
        print(todo.stop, file=sys.stderr)
        return todo.exit_code
    out = Path(args.out)
    from pipeline.crawl.flags import continuous_run
    from pipeline.crawl.sitemapfeed import keep_sitemap_bodies

    # --continuous and --stop-file for this run only (not remembered): a resume without them runs once
    settings = keep_sitemap_bodies(continuous_run(args, todo.settings))
    summary = run_crawl(settings, todo.seeds, out, resume=args.resume, progress=not args.no_progress,
                        fetcher=args.fetcher, plugins=todo.plugins)  # fmt: skip
    print_summary(summary, as_json=args.json)
    from pipeline.embedded.interrupt import finish

    code = finish(summary, sys.argv)  # 130 and how to resume when Ctrl-C stopped it
    if code == 0 and (why := held_by_cap(summary, cap=settings.scope.max_pages_per_host)):
        print(why, file=sys.stderr)
        return 0
    if code == 0 and (why := nothing_due(summary, continuous=settings.recrawl.continuous)):
        print(why, file=sys.stderr)
        return 0
    if code == 0 and (why := zero_pages(summary)):
        print(why, file=sys.stderr)
        return 1
    return code


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    crawl = sub.add_parser("crawl", help="crawl from seed URLs on the embedded default (no services)")
    crawl.add_argument("seeds", nargs="*", metavar="SEED_URL", help="http(s) URL to start from (any number)")
    crawl.add_argument("--seeds-file", metavar="FILE", help="more seed URLs, one a line (# starts a comment)")
    crawl.add_argument("--resume", action="store_true",
                       help="continue the crawl in --out with the settings it remembers (flags given override them)")
    crawl.add_argument("--fetcher", choices=KINDS, default=DEFAULT_FETCHER,
                       help=f"{DEFAULT_FETCHER} (the default); h1: the lean HTTP/1.1 client, aio: aiohttp's (both "
                            "event-driven); threaded: requests-futures (requests' adapters, proxies, auth)")
    crawl.add_argument("--continuous", action="store_true",
                       help="keep the collection fresh: re-fetch URLs as they fall due (recrawl settings) until "
                            "Ctrl-C or --stop-file")  # fmt: skip
    crawl.add_argument("--stop-file", default=None, metavar="FILE",
                       help="with --continuous: end cleanly once FILE exists (resume later with --resume)")
    add_crawl_flags(crawl)
    crawl.set_defaults(func=_cmd_crawl)
