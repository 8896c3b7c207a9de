"""``crawlfleet crawl`` and ``crawlfleet demo``: the embedded default, one command, no services."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from pipeline.observe import logs
from pipeline.settings import Settings, load_settings


def add_crawl_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="TOML settings file (sections as in pipeline/settings.py)")
    p.add_argument("--max-pages", type=int, default=None, help="stop after this many URLs (0 = no limit)")
    p.add_argument("--max-depth", type=int, default=None)
    p.add_argument("--out", default="crawl-out", help="crawl directory (store, segments, stats)")
    p.add_argument("--dns-server", action="append", default=None, metavar="HOST:PORT")
    p.add_argument("--allow-network", action="append", default=None, metavar="CIDR",
                   help="exempt this network from the SSRF guard (e.g. 127.0.0.0/8 for the testbed)")
    p.add_argument("--user-agent", default=None)
    p.add_argument("--per-host", type=int, default=None, help="concurrent connections per host")
    p.add_argument("--host-delay", type=float, default=None, help="minimum seconds between requests to a host")
    p.add_argument("--concurrency", type=int, default=None, help="sockets in flight")
    p.add_argument("--warc", action="store_true", help="also write fetched pages as WARC 1.1 under --out/warc")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    logs.add_arguments(p)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Flags are the last layer over file and env (see pipeline.settings)."""
    overrides: dict[str, dict[str, Any]] = {
        "scope": {"max_pages": args.max_pages, "max_depth": args.max_depth},
        "dns": {"servers": tuple(args.dns_server) if args.dns_server else None},
        "security": {"allow_networks": tuple(args.allow_network) if args.allow_network else None},
        "fetch": {"user_agent": args.user_agent, "concurrency": args.concurrency},
        "politeness": {"per_host_concurrency": args.per_host, "min_host_delay_s": args.host_delay},
        "store": {"warc": True if args.warc else None},
    }
    return load_settings(args.config, overrides=overrides)


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


def _print_summary(summary: dict[str, Any], *, as_json: bool) -> None:
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
    _print_summary(summary, as_json=args.json)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    logs.setup_from_args(args)
    from pipeline.harness.testbed.harness import TestbedProcess

    shutil.rmtree(args.out, ignore_errors=True)  # a demo always starts from scratch
    with TestbedProcess(args.hosts, args.pages, seed=args.seed) as tb:
        args.dns_server = [f"127.0.0.1:{tb.dns_port}"]
        args.allow_network = list(args.allow_network or []) + ["127.0.10.0/24"]
        settings = settings_from_args(args)
        if not args.no_progress and not args.json:
            print(f"demo: testbed of {args.hosts} hosts x {args.pages} pages on 127.0.10.0/24, "
                  f"DNS on 127.0.0.1:{tb.dns_port}; crawling into {args.out}/", file=sys.stderr)
        summary = run_crawl(settings, list(tb.seeds), Path(args.out), resume=False, progress=not args.no_progress)
        truth = tb.truth(max_depth=settings.scope.max_depth)
    summary["truth_pages"] = len(truth["pages"])
    _print_summary(summary, as_json=args.json)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    crawl = sub.add_parser("crawl", help="crawl from seed URLs on the embedded default (no services)")
    crawl.add_argument("seeds", nargs="*", metavar="SEED_URL")
    crawl.add_argument("--seeds-file")
    crawl.add_argument("--resume", action="store_true", help="continue the crawl in --out without refetching")
    add_crawl_flags(crawl)
    crawl.set_defaults(func=_cmd_crawl)

    demo = sub.add_parser("demo", help="start the testbed web and crawl it")
    demo.add_argument("--hosts", type=int, default=30)
    demo.add_argument("--pages", type=int, default=60)
    demo.add_argument("--seed", type=int, default=1)
    add_crawl_flags(demo)
    demo.set_defaults(func=_cmd_demo, out="var/demo")
