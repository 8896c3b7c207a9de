"""``crawlfleet report CRAWL_DIR --out DIR``: build the HTML report with plots and the stats JSON."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.observe.errors import existing_dir
from pipeline.observe.logs import add_arguments as add_log_arguments
from pipeline.observe.logs import event, setup_from_args

_log = logging.getLogger("pipeline.report")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="build an HTML report with plots (and report.json) from a crawl directory",
        description="Read CRAWL_DIR (stats.jsonl, segments/, summary.json) and write PNG plots, "
        "index.html and report.json to --out.",
    )
    parser.add_argument("crawl_dir", type=existing_dir, metavar="CRAWL_DIR",
                        help="a crawl's --out directory (stats.jsonl, segments/, summary.json)")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: CRAWL_DIR/report)")
    parser.add_argument("--embed", action="store_true", help="inline the PNGs in index.html (one-file report)")
    parser.add_argument("--title", default=None, help="page title")
    add_log_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here so `crawlfleet --help` does not pay for matplotlib.
    from pipeline.report.build import build_report

    setup_from_args(args)
    out = args.out if args.out is not None else args.crawl_dir / "report"
    try:
        result = build_report(args.crawl_dir, out, embed=args.embed, title=args.title)
    except FileNotFoundError as exc:
        event(_log, "report.failed", level=logging.ERROR, error=str(exc))
        return 2
    event(_log, "report.written", html=str(result.html), json=str(result.json), plots=len(result.plots))
    print(result.html)
    return 0
