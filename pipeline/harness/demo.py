"""``crawlfleet demo``: start the built-in test web and crawl it on the embedded default.

The harness's one product-facing command: it joins the testbed (harness) and the embedded crawl, so
it lives above both.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from pipeline.crawl.flags import add_crawl_flags, settings_from_args
from pipeline.embedded.cli import print_summary, run_crawl
from pipeline.observe import logs


def _cmd_demo(args: argparse.Namespace) -> int:
    logs.setup_from_args(args)
    from pipeline.harness.testbed.harness import TestbedProcess  # the testbed only when a demo runs

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
    print_summary(summary, as_json=args.json)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="start the testbed web and crawl it")
    demo.add_argument("--hosts", type=int, default=30)
    demo.add_argument("--pages", type=int, default=60)
    demo.add_argument("--seed", type=int, default=1)
    add_crawl_flags(demo)
    demo.set_defaults(func=_cmd_demo, out="var/demo")
