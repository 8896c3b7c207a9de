"""The Ctrl-C policy of the embedded crawl (pipeline.embedded.interrupt): pure parts, clock injected."""

from __future__ import annotations

import io
import shlex
import sys

import pytest

from pipeline.embedded.interrupt import EXIT_INTERRUPTED, Interrupt, finish, resume_command


class Quit(Exception):
    pass


def _exit(code: int) -> None:
    raise Quit(code)


def test_first_signal_stops_and_sets_the_deadline_second_forces_exit() -> None:
    now = [100.0]
    calls: list[str] = []
    err = io.StringIO()
    policy = Interrupt(grace_s=12.0, on_stop=lambda: calls.append("stop"), on_force=lambda: calls.append("force"),
                       err=err, clock=lambda: now[0], exit_now=_exit)  # fmt: skip
    assert policy.fence() and not policy.stopping and not policy.overdue()
    policy.signal()
    assert calls == ["stop"] and policy.stopping and not policy.fence()
    assert "stopping: no new requests" in err.getvalue() and "12 s" in err.getvalue()
    now[0] = 111.9
    assert not policy.overdue()
    now[0] = 112.0
    assert policy.overdue()
    with pytest.raises(Quit) as quit_:
        policy.signal()
    assert quit_.value.args == (EXIT_INTERRUPTED,) and calls == ["stop", "force"]
    assert "quitting now" in err.getvalue() and "interrupted; resume with: " in err.getvalue()


def test_force_exits_even_when_the_flush_fails() -> None:
    def broken() -> None:
        raise OSError("disk full")

    policy = Interrupt(grace_s=1.0, on_stop=lambda: None, on_force=broken, err=io.StringIO(), exit_now=_exit)
    policy.signal()
    with pytest.raises(Quit):
        policy.signal()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["/usr/bin/crawlfleet", "crawl", "http://a.test/", "--out", "my dir"],
         "crawlfleet crawl http://a.test/ --out 'my dir' --resume"),
        (["/usr/bin/crawlfleet", "crawl", "--resume", "--out", "o"], "crawlfleet crawl --resume --out o"),
        (["/src/pipeline/cli.py", "crawl", "--out", "o"], f"{shlex.quote(sys.executable)} -m pipeline.cli crawl --out o --resume"),
    ],
)  # fmt: skip
def test_resume_command_is_the_same_command_with_resume(argv: list[str], expected: str) -> None:
    assert resume_command(argv) == expected


def test_finish_says_how_to_resume_and_returns_130_only_when_interrupted() -> None:
    err = io.StringIO()
    assert finish({"interrupted": False}, ["crawlfleet", "crawl"], err=err) == 0 and err.getvalue() == ""
    code = finish({"interrupted": True, "abandoned": ["http://a.test/x"]}, ["crawlfleet", "crawl", "--out", "o"], err=err)
    assert code == 130
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("abandoned 1 URLs unfinished at the deadline") and lines[0].endswith(": http://a.test/x")
    assert lines[1] == "interrupted; resume with: crawlfleet crawl --out o --resume"
