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
