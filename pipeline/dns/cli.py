"""``crawlfleet dns``: run S1's bottom-level DNS server (the fleet's shared dqcache) and read its counters.

* ``crawlfleet dns serve [--listen 127.0.0.1:5336] [--upstream 127.0.0.1:5335]``: serve until SIGTERM or
  SIGINT. Prints one line ``dns: serving on HOST:PORT -> UPSTREAM`` once both UDP and TCP listen
  (``--listen 127.0.0.1:0`` picks a free port and that line says which); ``--ready-file`` also writes
  ``{"port": PORT}`` there. TTL clamps and the negative cache come from the ``[dns]`` settings.
* ``crawlfleet dns stats [--server 127.0.0.1:5336]``: the counters of a running server, as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import Any

from pipeline.settings import load_settings

DEFAULT_LISTEN = "127.0.0.1:5336"
DEFAULT_UPSTREAM = "127.0.0.1:5335"


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536 or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
        return value

    return parse


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("dns", help="the fleet's shared DNS server (S1 bottom layer, S2 dqcache)")
    sub = parser.add_subparsers(dest="dns_command", required=True)
    serve = sub.add_parser("serve", help="serve the shared dqcache over UDP and TCP until SIGTERM/SIGINT")
    serve.add_argument(
        "--listen", type=_address, default=DEFAULT_LISTEN, help="HOST:PORT (port 0 = a free one)"
    )
    serve.add_argument(
        "--upstream", default=DEFAULT_UPSTREAM, help="the upper-level server, IP:PORT (unbound)"
    )
    serve.add_argument(
        "--cache-size", type=_positive(int), default=1_000_000, help="IPv4 names held (IPv6: 1/4)"
    )
    serve.add_argument(
        "--upstream-timeout", type=_positive(float), default=0.5, help="seconds per try upstream"
    )
    serve.add_argument("--upstream-tries", type=_positive(int), default=3, help="tries per name upstream")
    serve.add_argument("--max-pending", type=_positive(int), default=4096, help="queries in progress at most")
    serve.add_argument("--config", help="TOML settings file (its [dns] TTL clamps and negative cache)")
    serve.add_argument("--ready-file", help='write {"port": PORT} here once serving')
    serve.set_defaults(func=_serve)
    stats = sub.add_parser("stats", help="print a running server's counters as JSON")
    stats.add_argument("--server", type=_address, default=DEFAULT_LISTEN, help="HOST:PORT of the server")
    stats.set_defaults(func=_stats)


def _serve(args: argparse.Namespace) -> int:
    from pipeline.dns.resolver import parse_server
    from pipeline.dns.server import DqServer, ServerConfig, build_dqcache

    settings = load_settings(args.config).dns
    try:
        upstream = parse_server(args.upstream)
    except ValueError as exc:
        print(f"crawlfleet dns serve: error: --upstream {args.upstream!r}: {exc}", file=sys.stderr)
        return 2
    config = ServerConfig(
        upstream=upstream, cache_size=args.cache_size, upstream_timeout_s=args.upstream_timeout,
        upstream_tries=args.upstream_tries, max_pending=args.max_pending,
    )  # fmt: skip

    async def main() -> None:
        server = DqServer(build_dqcache(settings, config), max_pending=config.max_pending)
        host, port = args.listen
        chosen = await server.start(host, port)
        if args.ready_file:
            Path(args.ready_file).write_text(json.dumps({"port": chosen}))
        print(f"dns: serving on {host}:{chosen} -> {upstream}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        print(f"dns: stopping; counters {json.dumps(server.stats(), sort_keys=True)}", flush=True)
        await server.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0


def _stats(args: argparse.Namespace) -> int:
    from pipeline.dns.wire import ask_stats

    print(json.dumps(ask_stats(args.server), indent=2, sort_keys=True))
    return 0
