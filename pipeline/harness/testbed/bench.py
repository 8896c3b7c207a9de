"""``crawlfleet bench testbed``: the testbed's own HTTP and DNS throughput (see docs/bench/testbed.md).

Runs both HTTP engines in the same run, so the fast engine is reported as a ratio to aiohttp's
server (the baseline) measured on the same machine minutes apart. With ``--living R`` it instead runs
the fast engine on the living web (``--mutate``, R test seconds per second) against the static web
(the baseline): what changing pages, validators and sitemaps cost the server per request.
"""

from __future__ import annotations

import argparse
from typing import Any

from pipeline.harness.testbed.loadgen import measure


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", type=int, default=1000, help="testbed hosts the load is spread over")
    parser.add_argument("--pages", type=int, default=1000, help="pages per testbed host")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long each load run lasts")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight from the load generator")
    parser.add_argument(
        "--living",
        type=float,
        default=None,
        metavar="RATE",
        help="compare the living web (--mutate at RATE test s per s) with the static one, fast engine",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    kw = {"seconds": args.seconds, "concurrency": args.concurrency}
    if args.living is not None:
        live = measure(args.hosts, args.pages, engine="fast", mutate_rate=args.living, **kw)
        static = measure(args.hosts, args.pages, engine="fast", **kw)
        return {
            "living": live,
            "static_baseline": static,
            **{
                f"{load}_cpu_per_req_vs_static": round(
                    live[load]["server_cpu_us_per_req"] / max(1e-9, static[load]["server_cpu_us_per_req"]), 3
                )
                for load in ("http_distinct", "http_repeated")
            },
        }
    fast = measure(args.hosts, args.pages, engine="fast", **kw)
    base = measure(args.hosts, args.pages, engine="aiohttp", **kw)
    ratios = {
        f"{load}_cpu_per_req_vs_aiohttp": round(
            fast[load]["server_cpu_us_per_req"] / max(1e-9, base[load]["server_cpu_us_per_req"]), 3
        )
        for load in ("http_distinct", "http_repeated")
    }
    return {"fast": fast, "aiohttp_baseline": base, **ratios}
