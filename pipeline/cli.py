"""The ``crawlfleet`` command. Each sub-command only wires components; areas register their own.

An area module exposes ``register(subparsers)`` which adds its sub-command(s) and sets
``func=callable(args) -> int`` on the parser defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
import threading
from collections.abc import Iterator

from pipeline.harness.bench import BENCHES

# Areas that contribute sub-commands, in help order, with the commands each registers. Only the
# area owning the command being run is imported: `crawl` should not pay for importing Celery.
AREAS: dict[str, tuple[str, ...]] = {
    "pipeline.embedded.cli": ("crawl",),
    "pipeline.harness.demo": ("demo",),
    "pipeline.harness.testbed.cli": ("testbed",),
    "pipeline.report.cli": ("report",),
    "pipeline.storage.cli": ("export",),
    "jobs.cli": ("jobs",),
    "pipeline.transport.cli": ("dispatcher", "worker", "submit", "links"),
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


def _bench(args: argparse.Namespace, rest: list[str]) -> int:
    module = importlib.import_module(BENCHES[args.name])
    parser = argparse.ArgumentParser(prog=f"crawlfleet bench {args.name}")
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
    parser = argparse.ArgumentParser(prog="crawlfleet", description="A distributed web crawler.")
    sub = parser.add_subparsers(dest="command", required=True)
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
    bench = sub.add_parser("bench", help="run a benchmark", add_help=False)
    bench.add_argument("name", choices=sorted(BENCHES))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args, rest = parser.parse_known_args(argv)
    if args.command == "bench":
        return _bench(args, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
