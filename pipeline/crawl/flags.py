"""The crawl flags both scales share (``crawl``, ``demo``, ``dispatcher``) and the settings they make;
``crawlfleet settings``, which prints the effective settings and where each value came from.

Flags are the last layer over defaults, a crawl directory's remembered settings, file and environment;
``pipeline.settings`` does the reading, and checks a flag at parse time by the rule a file value obeys.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.crawl import remember
from pipeline.observe import logs
from pipeline.observe.errors import UsageError
from pipeline.plugins.chain import PluginSet
from pipeline.settings import Loaded, Settings, arg_type, load_settings_traced, sections
from pipeline.settings.security import redact, redact_section
from pipeline.storage.factory import DEFAULT_CRAWL_DIR


def add_crawl_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="TOML settings file (every setting: docs/crawlfleet.example.toml)")
    p.add_argument("--max-pages", type=arg_type("scope.max_pages"), default=None, metavar="N",
                   help="stop after this many URLs in all, earlier runs of a resumed crawl included (0 = no limit)")
    p.add_argument("--max-depth", type=arg_type("scope.max_depth"), default=None, metavar="N",
                   help="follow links at most this many hops from a seed")
    p.add_argument("--out", default=DEFAULT_CRAWL_DIR, metavar="DIR",
                   help="crawl directory (store, segments, stats, remembered settings); default %(default)s")
    p.add_argument("--dns-server", type=arg_type("dns.servers"), action="append", default=None, metavar="HOST:PORT",
                   help="DNS server to ask, repeatable (default: the system's resolv.conf)")
    p.add_argument("--allow-network", type=arg_type("security.allow_networks"), action="append", default=None,
                   metavar="CIDR", help="exempt this network from the SSRF guard (e.g. 127.0.0.0/8 for the testbed)")
    p.add_argument("--user-agent", default=None, metavar="UA", help="User-Agent header sent with every request")
    p.add_argument("--per-host", type=arg_type("politeness.per_host_concurrency"), default=None, metavar="N",
                   help="concurrent connections per host (>= 1)")
    p.add_argument("--host-delay", type=arg_type("politeness.min_host_delay_s"), default=None, metavar="SECONDS",
                   help="minimum seconds between requests to a host (>= 0)")
    p.add_argument("--concurrency", type=arg_type("fetch.concurrency"), default=None, metavar="N",
                   help="sockets in flight (>= 1)")
    p.add_argument("--warc", action="store_true", help="also write fetched pages as WARC 1.1 under --out/warc")
    p.add_argument("--plugin", action="append", default=None, metavar="SPEC",
                   help="run an extraction plugin: package.module:Name or an entry point of crawlfleet.plugins, "
                        "repeatable (docs/PLUGINS.md); its items go to --out/items")  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    logs.add_arguments(p)


def overrides_from_args(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The settings the crawl flags in ``args`` set (None = flag not given)."""
    return {
        "scope": {"max_pages": args.max_pages, "max_depth": args.max_depth},
        "dns": {"servers": tuple(args.dns_server) if args.dns_server else None},
        "security": {"allow_networks": tuple(args.allow_network) if args.allow_network else None},
        "fetch": {"user_agent": args.user_agent, "concurrency": args.concurrency},
        "politeness": {"per_host_concurrency": args.per_host, "min_host_delay_s": args.host_delay},
        "store": {"warc": True if args.warc else None},
        "plugins": {"enabled": tuple(args.plugin) if getattr(args, "plugin", None) else None},
    }


def loaded_from_args(args: argparse.Namespace, *, remembered: Mapping[str, Mapping[str, Any]] | None = None) -> Loaded:
    """Settings with their sources; ``remembered``: a crawl directory's saved settings (on resume)."""
    return load_settings_traced(args.config, overrides=overrides_from_args(args), remembered=remembered)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Flags are the last layer over file and env (see pipeline.settings)."""
    return loaded_from_args(args).settings


def plugins_of(settings: Settings, objects: Sequence[Any] = ()) -> PluginSet | None:
    """The crawl's plugins, loaded and checked before anything is created; UsageError (one line) for one
    that cannot be used (``pipeline.plugins.loading``). None when the crawl has none."""
    from pipeline.plugins.loading import PluginError, load

    try:
        return load(settings, objects=objects)
    except PluginError as exc:
        raise UsageError(str(exc)) from None


def check_stop_file(args: argparse.Namespace, settings: Settings) -> None:
    """Only a continuous run watches a stop file: ``--stop-file`` for one that is not (neither
    ``--continuous`` nor ``recrawl.continuous``) would never be read, so it is refused (UsageError)."""
    stop = getattr(args, "stop_file", None)
    if stop and not (getattr(args, "continuous", False) or settings.recrawl.continuous):
        raise UsageError(f"--stop-file {stop}: only a continuous run watches a stop file; add --continuous")


def continuous_run(args: argparse.Namespace, settings: Settings) -> Settings:
    """``settings`` with this run's ``--continuous`` and ``--stop-file`` (for this run only, not remembered:
    a resume without them runs as its settings say). ``--stop-file`` applies to a run made continuous by
    its settings (``CRAWLFLEET_RECRAWL_CONTINUOUS=1``) too."""
    rc: dict[str, Any] = {}
    if getattr(args, "continuous", False):
        rc["continuous"] = True
    if getattr(args, "stop_file", None):
        rc["stop_file"] = args.stop_file
    return settings.with_overrides({"recrawl": rc}, where="--continuous") if rc else settings


def render(loaded: Loaded, *, only: Mapping[str, Any] | None = None) -> str:
    """The settings as TOML a ``--config`` file takes, each value followed by ``# SOURCE``."""
    lines = []
    for section in sections():
        if only is not None and section not in only:
            continue
        lines.append(f"[{section}]")
        values = getattr(loaded.settings, section)
        for f in dataclasses.fields(values):
            name, value = f.name, getattr(values, f.name)
            value = redact(f"{section}.{name}", value)  # secrets never printed (docs/SECURITY.md)
            text = json.dumps(list(value) if isinstance(value, tuple) else value)
            lines.append(f"{name} = {text}  # {loaded.sources[f'{section}.{name}']}")
        lines.append("")
    return "\n".join(lines)


def _cmd_settings(args: argparse.Namespace) -> int:
    memory = remember.load(Path(args.out)) if args.resume else None
    if args.resume and memory is None:
        print(f"# {args.out} remembers no settings ({remember.FILE} not found)", file=sys.stderr)
    loaded = loaded_from_args(args, remembered=memory.settings if memory else None)
    if args.json:
        table = {s: redact_section(s, dataclasses.asdict(getattr(loaded.settings, s))) for s in sections()}
        print(json.dumps({"settings": table, "sources": loaded.sources}, sort_keys=True))
    else:
        print("# effective settings; after each value, where it came from:")
        print("# default, crawl-dir (remembered by --out on --resume), file:PATH, env:NAME, flag")
        print(render(loaded), end="")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("settings", help="print the effective settings and where each value came from",
                       description="Print the settings a crawl with these flags would use, as TOML, each value "
                       "followed by its source: default, crawl-dir, file:PATH, env:NAME or flag.")  # fmt: skip
    p.add_argument("--resume", action="store_true", help="include what the crawl in --out remembers, as a resume would")
    add_crawl_flags(p)
    p.set_defaults(func=_cmd_settings)
