"""``crawlfleet testbed serve | truth``: run the synthetic web + DNS zone, or print its ground truth."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pipeline.harness.testbed.model import Web


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("testbed", help="the synthetic web + DNS zone on loopback")
    sub = parser.add_subparsers(dest="testbed_command", required=True)

    serve = sub.add_parser("serve", help="serve the testbed until SIGTERM/SIGINT")
    _web_args(serve)
    serve.add_argument("--port", type=int, default=8080, help="HTTP port on every testbed address (0 = free)")
    serve.add_argument("--dns-port", type=int, default=5353, help="DNS port on 127.0.0.1, UDP+TCP (0 = free)")
    serve.add_argument("--access-log", default=None, help="JSON-lines access log path")
    serve.add_argument("--ready-file", default=None, help="write JSON (ports, seeds, ips) here once ready")
    serve.add_argument("--workers", type=int, default=1, help="HTTP processes sharing the sockets")
    serve.add_argument("--hostile", action="store_true", help="also serve hostile.crawl.test (own port)")
    serve.add_argument("--hostile-port", type=int, default=0, help="port of hostile.crawl.test (0 = free)")
    serve.add_argument("--dns-latency-ms", type=float, default=0.0, help="delay added to every DNS answer")
    serve.add_argument("--dns-slow-ms", type=float, default=2000.0, help="delay of slow.crawl.test")
    serve.add_argument("--cache-size", type=int, default=4096, help="rendered pages kept (LRU)")
    serve.add_argument(
        "--engine", choices=("fast", "aiohttp"), default="fast", help="HTTP server implementation"
    )
    serve.add_argument(
        "--gzip-pages",
        action="store_true",
        help="gzip ordinary pages for clients that accept it (fast engine)",
    )
    serve.add_argument("--no-ipv6", action="store_true", help="do not also listen on ::1")
    serve.set_defaults(func=_serve)

    load = sub.add_parser("load", help="measure how fast a testbed serves (HTTP and DNS)")
    load.add_argument("--hosts", type=int, default=1000)
    load.add_argument("--pages", type=int, default=1000)
    load.add_argument("--seconds", type=float, default=5.0)
    load.add_argument("--concurrency", type=int, default=64)
    load.add_argument("--engine", choices=("fast", "aiohttp"), default="fast")
    load.add_argument("--workers", type=int, default=1)
    load.add_argument("--json", action="store_true", help="print JSON (the only format)")
    load.set_defaults(func=_load)

    truth = sub.add_parser("truth", help="print the ground truth of a testbed web")
    _web_args(truth)
    truth.add_argument("--port", type=int, default=8080)
    truth.add_argument("--max-depth", type=int, default=20)
    truth.add_argument("--json", action="store_true", help="print JSON (the only format)")
    truth.set_defaults(func=_truth)


def _web_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", type=int, required=True)
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)


def _serve(args: argparse.Namespace) -> int:
    from pipeline.harness.testbed.serve import ServeOptions, serve

    return serve(
        ServeOptions(
            hosts=args.hosts,
            pages=args.pages,
            seed=args.seed,
            port=args.port,
            dns_port=args.dns_port,
            access_log=args.access_log,
            ready_file=args.ready_file,
            workers=args.workers,
            hostile=args.hostile,
            hostile_port=args.hostile_port,
            dns_latency_ms=args.dns_latency_ms,
            dns_slow_ms=args.dns_slow_ms,
            cache_size=args.cache_size,
            ipv6=not args.no_ipv6,
            engine=args.engine,
            gzip_pages=args.gzip_pages,
        )
    )


def _load(args: argparse.Namespace) -> int:
    from pipeline.harness.testbed.loadgen import measure

    result = measure(
        args.hosts,
        args.pages,
        seconds=args.seconds,
        concurrency=args.concurrency,
        engine=args.engine,
        workers=args.workers,
    )
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


def _truth(args: argparse.Namespace) -> int:
    from pipeline.harness.testbed.truth import compute_truth

    web = Web(args.hosts, args.pages, seed=args.seed, port=args.port)
    json.dump(compute_truth(web, max_depth=args.max_depth), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (``python -m pipeline.harness.testbed.cli serve ...``), used by the test harness so
    the testbed starts even when another area's CLI module is broken."""
    parser = argparse.ArgumentParser(prog="crawlfleet")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["testbed", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
