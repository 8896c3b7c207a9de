"""The crawl flags both scales share (``crawl``, ``demo``, ``dispatcher``) and the settings they make.

Flags are the last layer over defaults, file and environment; ``pipeline.settings`` does the reading.
"""

from __future__ import annotations

import argparse
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
