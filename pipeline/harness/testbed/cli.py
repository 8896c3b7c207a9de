"""``crawlfleet testbed serve | truth``: run the synthetic web + DNS zone, or print its ground truth."""

from __future__ import annotations

import argparse
import errno
import json
import math
import sys
from collections.abc import Callable
from typing import Any

from pipeline.harness.testbed.living import CLASSIC, MIXES
from pipeline.harness.testbed.model import Web


def _at_least(low: float, kind: Callable[[str], Any] = int, high: float | None = None) -> Callable[[str], Any]:
    """An argparse ``type=``: a number ``low`` <= n (<= ``high``); the message names the bad value. (The
    testbed imports nothing of the crawl, so it keeps its own.)"""
    what = "an integer" if kind is int else "a number"
    span = f">= {low:g}" if high is None else f"{low:g}..{high:g}"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {what} {span}, got {text!r}")
        return value

    return parse


_PORT = _at_least(0, int, 65535)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("testbed", help="the synthetic web + DNS zone on loopback")
    sub = parser.add_subparsers(dest="testbed_command", required=True)

    serve = sub.add_parser("serve", help="serve the testbed until SIGTERM/SIGINT")
    _web_args(serve)
    serve.add_argument("--port", type=_PORT, default=8080, help="HTTP port on every testbed address (0 = free)")
    serve.add_argument("--dns-port", type=_PORT, default=5353, help="DNS port on 127.0.0.1, UDP+TCP (0 = free)")
    serve.add_argument("--access-log", default=None, help="JSON-lines access log path")
    serve.add_argument("--ready-file", default=None, help="write JSON (ports, seeds, ips) here once ready")
    serve.add_argument("--workers", type=_at_least(1), default=1, help="HTTP processes sharing the sockets")
    serve.add_argument("--hostile", action="store_true", help="also serve hostile.crawl.test (own port)")
    serve.add_argument("--hostile-port", type=_PORT, default=0, help="port of hostile.crawl.test (0 = free)")
    serve.add_argument("--dns-latency-ms", type=_at_least(0, float), default=0.0, help="delay added to every DNS answer")
    serve.add_argument("--dns-slow-ms", type=_at_least(0, float), default=2000.0, help="delay of slow.crawl.test")
    serve.add_argument("--cache-size", type=_at_least(0), default=4096, help="rendered pages kept (LRU)")
    serve.add_argument(
        "--engine", choices=("fast", "aiohttp"), default="fast", help="HTTP server implementation"
    )
    serve.add_argument(
        "--gzip-pages",
        action="store_true",
        help="gzip ordinary pages for clients that accept it (fast engine)",
    )
    serve.add_argument(
        "--zstd-pages",
        action="store_true",
        help="zstd-code ordinary pages for clients that accept it, before gzip (fast engine)",
    )
    serve.add_argument("--no-ipv6", action="store_true", help="do not also listen on ::1")
    serve.add_argument("--tls", action="store_true",
                       help="also serve the web over HTTPS with the testbed's own CA (fast engine; tlscerts.py)")
    serve.add_argument("--tls-port", type=_PORT, default=0, help="HTTPS port on every testbed address (0 = free)")
    serve.add_argument("--tls-dir", default=None, help="write the CA and certificates here (default: a temporary directory)")
    serve.add_argument("--plain-http", choices=("serve", "redirect", "disallow"), default="serve",
                       help="with --tls, the plain port: serve the http web, 301 to https, or disallow it in robots.txt")  # fmt: skip
    serve.add_argument(
        "--mutate", action="store_true", help="the living web: pages change, ETag/304, sitemaps (living.py)"
    )
    _clock_args(serve, epoch_help="wall seconds at test time 0 (default: start time)")
    serve.add_argument(
        "--no-hostile-sitemaps", action="store_true", help="with --mutate: leave out the hostile sitemaps"
    )
    serve.add_argument("--robots-change-s", type=_at_least(0.0, float), default=None,
                       help="with --mutate: host 10 (mod hosts) changes its robots.txt this many seconds after the epoch")  # fmt: skip
    serve.add_argument("--throttle-every", type=_at_least(0), default=0,
                       help="with --mutate: host 11 (mod hosts) answers every Nth request 429 with Retry-After")  # fmt: skip
    serve.add_argument("--lying-validators", action="store_true",
                       help="with --mutate: hosts i %% 12 == 7 send validators that never change and 304 them")  # fmt: skip
    serve.set_defaults(func=_serve)

    load = sub.add_parser("load", help="measure how fast a testbed serves (HTTP and DNS)")
    load.add_argument("--hosts", type=_at_least(1), default=1000, help="sites of the web measured")
    load.add_argument("--pages", type=_at_least(1), default=1000, help="pages per site")
    load.add_argument("--seconds", type=_at_least(0.1, float), default=5.0, help="how long to load it")
    load.add_argument("--concurrency", type=_at_least(1), default=64, help="requests in flight")
    load.add_argument("--engine", choices=("fast", "aiohttp"), default="fast", help="HTTP server implementation")
    load.add_argument("--workers", type=_at_least(1), default=1, help="HTTP processes sharing the sockets")
    load.add_argument("--json", action="store_true", help="print JSON (the only format)")
    load.set_defaults(func=_load)

    truth = sub.add_parser("truth", help="print the ground truth of a testbed web")
    _web_args(truth)
    truth.add_argument("--port", type=_PORT, default=8080, help="the port the web's URLs name")
    truth.add_argument("--max-depth", type=_at_least(0), default=20, help="hops from the seeds counted")
    truth.add_argument("--json", action="store_true", help="print JSON (the only format)")
    truth.add_argument(
        "--at", type=float, default=None, help="the living web's versions at this test time (seconds)"
    )
    _clock_args(truth, epoch_help="with --at: the serving testbed's epoch (its ready file's mutate.epoch)")
    truth.set_defaults(func=_truth)


def _clock_args(parser: argparse.ArgumentParser, *, epoch_help: str) -> None:
    parser.add_argument("--mutate-epoch", type=float, default=None, help=epoch_help)
    parser.add_argument(
        "--mutate-rate", type=_at_least(1e-6, float), default=1.0, help="test seconds per wall second"
    )
    parser.add_argument("--mutate-mix", choices=tuple(MIXES), default=CLASSIC,
                        help="the pages' change classes (living.MIXES; default %(default)s)")  # fmt: skip


def _web_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", type=_at_least(1), required=True, help="sites of the web (site0.crawl.test ...)")
    parser.add_argument("--pages", type=_at_least(1), required=True, help="pages per site")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the link graph")
    parser.add_argument("--products", action="store_true",
                        help="product pages: JSON-LD and microdata on some normal pages (products.py)")  # fmt: skip


def _serve(args: argparse.Namespace) -> int:
    from pipeline.harness.testbed.serve import ServeOptions, serve

    options = ServeOptions(
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
        zstd_pages=args.zstd_pages,
        mutate=args.mutate,
        mutate_epoch=args.mutate_epoch,
        mutate_rate=args.mutate_rate,
        mutate_mix=args.mutate_mix,
        hostile_sitemaps=not args.no_hostile_sitemaps,
        robots_change_s=math.inf if args.robots_change_s is None else args.robots_change_s,
        throttle_every=args.throttle_every,
        lying_validators=args.lying_validators,
        tls=args.tls,
        tls_port=args.tls_port,
        tls_dir=args.tls_dir,
        plain_http=args.plain_http,
        products=args.products,
    )
    try:
        return serve(options)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        print(f"crawlfleet testbed serve: error: a port is already in use: --port {args.port}, --dns-port "
              f"{args.dns_port} or --hostile-port {args.hostile_port} (expected free ports, or 0 for any)",
              file=sys.stderr)  # fmt: skip
        return 1


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

    if args.at is not None:
        from pipeline.harness.testbed.livetruth import living_truth
        from pipeline.harness.testbed.living import Living

        living = Living(args.mutate_epoch or 0.0, args.mutate_rate, mix=args.mutate_mix)
        web = Web(args.hosts, args.pages, seed=args.seed, port=args.port, living=living)
        json.dump(living_truth(web, args.at), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    web = Web(args.hosts, args.pages, seed=args.seed, port=args.port, products=args.products)
    truth = compute_truth(web, max_depth=args.max_depth)
    if args.products:
        from pipeline.harness.testbed.products import products_truth

        truth["products"] = products_truth(web, truth["pages"])
    json.dump(truth, sys.stdout, indent=1)
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
