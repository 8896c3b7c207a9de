"""Every flag and argument of every ``crawlfleet`` command says what it is for (``--help`` is the manual)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from pipeline.cli import build_parser


def _walk(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases share a parser
                yield from _walk(child)
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield parser.prog, action


def test_every_flag_and_argument_has_help() -> None:
    actions = list(_walk(build_parser()))
    missing = [f"{prog} {'/'.join(a.option_strings) or a.dest}" for prog, a in actions if not (a.help or "").strip()]
    assert len(actions) > 100  # the whole tree was walked, not one area
    assert missing == []


def test_every_command_has_help() -> None:
    root = build_parser()
    (sub,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {c.dest: c.help for c in sub._choices_actions}
    assert {"crawl", "demo", "settings", "report", "export", "jobs", "dispatcher", "worker", "submit", "testbed",
            "bench"} <= set(helps)  # fmt: skip
    assert [name for name, text in helps.items() if not text] == []


def test_every_bench_flag_has_help() -> None:
    # Bench modules add their flags when `crawlfleet bench NAME` runs, so the tree walk above misses them.
    import importlib

    from pipeline.harness.bench import BENCHES

    missing = []
    for name, module in BENCHES.items():
        parser = argparse.ArgumentParser(prog=f"crawlfleet bench {name}")
        importlib.import_module(module).add_arguments(parser)
        missing += [f"{name} {'/'.join(a.option_strings) or a.dest}" for a in parser._actions
                    if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()]  # fmt: skip
    assert missing == []


def test_the_commands_of_one_crawl_agree_on_its_directory_without_flags() -> None:
    """``crawl`` and ``dispatcher`` write to ``crawl-out`` by default; ``links`` and ``export warc`` read the
    same place by default (they used to read var/fleet and var/crawl.db, so the defaults never met)."""
    outs = {prog: a.default for prog, a in _walk(build_parser()) if a.dest == "out" and a.default is not None}
    assert {p.split()[-1]: d for p, d in outs.items() if p.split()[-1] in ("crawl", "dispatcher", "links")} == {
        "crawl": "crawl-out", "dispatcher": "crawl-out", "links": "crawl-out"}  # fmt: skip
    (store,) = [a.default for p, a in _walk(build_parser()) if p.endswith("export warc") and a.dest == "store"]
    assert store == "sqlite:crawl-out/"
