"""``crawlfleet demo``: start the built-in test web and crawl it on the embedded default.

The harness's one product-facing command: it joins the testbed (harness) and the embedded crawl, so
it lives above both. A demo starts from scratch: it empties ``--out`` first, but only a directory it
created itself (marked with ``MARKER``), an empty one, or any with ``--force``; it never deletes what
a user put in a directory of theirs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from pipeline.crawl.flags import add_crawl_flags, settings_from_args
from pipeline.embedded.cli import print_summary, run_crawl
from pipeline.observe import logs
from pipeline.observe.errors import UsageError, int_at_least
from pipeline.observe.verdict import zero_pages

MARKER = ".crawlfleet-demo"  # in a directory `crawlfleet demo` created, so a later demo may empty it


def prepare_out(out: Path, *, force: bool) -> None:
    """Make ``out`` an empty directory marked as the demo's; UsageError when it holds what a user put there."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file (expected a directory for the demo's crawl)")
    if out.is_dir() and any(out.iterdir()):
        if not (force or (out / MARKER).exists()):
            raise UsageError(f"--out {out}: not empty and not made by a demo (expected an empty or new "
                             "directory, or --force to delete what it holds)")  # fmt: skip
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("created by `crawlfleet demo`; a later demo may delete this directory\n")


def _cmd_demo(args: argparse.Namespace) -> int:
    logs.setup_from_args(args)
    from pipeline.harness.testbed.harness import TestbedProcess  # the testbed only when a demo runs

    settings_from_args(args)  # every flag and settings value checked before anything is deleted
    prepare_out(Path(args.out), force=args.force)
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
    print_summary(summary, as_json=args.json)
    if why := zero_pages(summary):
        print(why.replace("crawl:", "demo:", 1), file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="start the testbed web and crawl it")
    demo.add_argument("--hosts", type=int_at_least(1), default=30, metavar="N", help="testbed sites (default 30)")
    demo.add_argument("--pages", type=int_at_least(1), default=60, metavar="N", help="pages per site (default 60)")
    demo.add_argument("--seed", type=int, default=1, help="random seed of the testbed's link graph")
    demo.add_argument("--force", action="store_true", help="empty --out even if a demo did not create it")
    add_crawl_flags(demo)
    demo.set_defaults(func=_cmd_demo, out="var/demo")
