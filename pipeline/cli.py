"""The ``crawlfleet`` command. Each sub-command only wires components; areas register their own.

An area module exposes ``register(subparsers)`` which adds its sub-command(s) and sets
``func=callable(args) -> int`` on the parser defaults.

Errors reach the user as one line on stderr: a usage error (a bad flag, argument or settings value;
``UsageError``, ``SettingsError``) exits 2, any other failure exits 1. A traceback is printed only
with ``--log-level DEBUG`` (``CRAWLFLEET_DEBUG=1`` for a command without that flag).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from importlib import metadata
from typing import NoReturn

from pipeline.harness.bench import BENCHES
from pipeline.observe.errors import UsageError, one_line
from pipeline.settings import SettingsError

# Areas that contribute sub-commands, in help order, with the commands each registers. Only the
# area owning the command being run is imported: `crawl` should not pay for importing Celery.
AREAS: dict[str, tuple[str, ...]] = {
    "pipeline.embedded.cli": ("crawl",),
    "pipeline.harness.demo": ("demo",),
    "pipeline.harness.testbed.cli": ("testbed",),
    "pipeline.report.cli": ("report",),
    "pipeline.export.cli": ("export",),
    "jobs.cli": ("jobs",),
    "jobs.dupreport": ("duplicates",),
    "pipeline.crawl.flags": ("settings",),
    "pipeline.transport.cli": ("dispatcher", "worker", "submit", "links"),
    "pipeline.dns.cli": ("dns",),
}


@contextlib.contextmanager
def _ticker(desc: str) -> Iterator[None]:
    """An elapsed-time line on a terminal while a benchmark runs (crawl benches draw their own bar too)."""
    if not sys.stderr.isatty():
        yield
        return
    from tqdm import tqdm

    bar = tqdm(desc=desc, bar_format="{desc}: {elapsed}", file=sys.stderr, position=1, leave=False)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(1.0):
            bar.refresh()

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        bar.close()


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (``PROG: error: MESSAGE``) and exit 2; sub-parsers inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def version() -> str:
    try:
        return metadata.version("crawlfleet")
    except metadata.PackageNotFoundError:  # run from a tree that was never installed
        return "unknown"


def _bench_help(rest: list[str]) -> int:
    text = (
        "usage: crawlfleet bench NAME [--json] [options]\n\nbenchmarks: " + ", ".join(sorted(BENCHES))
        + "\n\n`crawlfleet bench NAME --help` lists a benchmark's options; --json prints the result as JSON.\n"
    )  # fmt: skip
    if any(a in ("-h", "--help") for a in rest):
        print(text, end="")
        return 0
    raise UsageError(f"give a benchmark NAME, one of: {', '.join(sorted(BENCHES))}")


def _bench(args: argparse.Namespace, rest: list[str]) -> int:
    if args.name is None:
        return _bench_help(rest)
    module = importlib.import_module(BENCHES[args.name])
    parser = Parser(prog=f"crawlfleet bench {args.name}")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    module.add_arguments(parser)
    bargs = parser.parse_args(rest)
    with _ticker(f"bench {args.name}"):
        result = module.run(bargs)
    if bargs.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser; with ``command``, only the area that owns it is imported."""
    parser = Parser(prog="crawlfleet", description="A distributed web crawler.")
    parser.add_argument("--version", action="version", version=f"crawlfleet {version()}",
                        help="print the version and exit")  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    owners = [m for m, cmds in AREAS.items() if command in cmds]
    if command != "bench" and not owners:
        owners = list(AREAS)  # help, or an unknown command: show everything
    for name in owners:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise  # a real missing dependency, not an area (or its package) still to be written
            continue
        module.register(sub)
    bench = sub.add_parser("bench", help="run a benchmark (crawlfleet bench --help lists them)", add_help=False)
    bench.add_argument("name", nargs="?", choices=sorted(BENCHES), metavar="NAME",
                       help=f"the benchmark: {', '.join(sorted(BENCHES))}")  # fmt: skip
    return parser


def _debugging(args: argparse.Namespace) -> bool:
    """A traceback is wanted: ``--log-level DEBUG`` (or CRAWLFLEET_DEBUG=1 for commands without that flag)."""
    return str(getattr(args, "log_level", "") or "").upper() == "DEBUG" or os.environ.get("CRAWLFLEET_DEBUG") == "1"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    try:  # a usage error is returned as exit code 2 (--help and --version as 0), as a command's would be
        args, rest = parser.parse_known_args(argv)
        if args.command != "bench" and rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    prog = f"crawlfleet {args.command}"
    try:
        if args.command == "bench":
            return _bench(args, rest)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except (UsageError, SettingsError) as exc:
        if _debugging(args):
            raise
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if _debugging(args):
            raise
        hint = "--log-level DEBUG" if hasattr(args, "log_level") else "CRAWLFLEET_DEBUG=1"
        print(f"{prog}: error: {one_line(exc)} ({hint} shows the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
