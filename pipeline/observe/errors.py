"""What a command tells its user when something is wrong: one line, the bad value, what was expected.

``crawlfleet`` (pipeline/cli.py) turns a ``UsageError`` into exit code 2 and any other failure into
exit code 1, each as one line on stderr; a traceback only with ``--log-level DEBUG``. The argparse
``type=`` helpers here reject a bad flag at parse time with a message naming the value.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """The user asked for something that cannot work as given (exit code 2). The message is one line that
    names the bad value and says what was expected."""


def one_line(exc: BaseException) -> str:
    """``exc`` as one line: its message (with the file name of an OSError), or its class when it has none."""
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    if not isinstance(exc, UsageError | ValueError | OSError):
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())


def _number(kind: Callable[[str], Any], what: str, low: float) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"expected {what} >= {low:g}, got {text!r}")
        return value

    return parse


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type=``: an integer >= ``low``."""
    return _number(int, "an integer", low)


def float_at_least(low: float) -> Callable[[str], float]:
    """An argparse ``type=``: a number >= ``low``."""
    return _number(float, "a number", low)


def port(text: str) -> int:
    """An argparse ``type=``: a TCP/UDP port, 0 (any free port) to 65535."""
    value = _number(int, "a port number", 0)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {text!r}")
    return int(value)


def existing_dir(text: str) -> Path:
    """An argparse ``type=``: a directory that exists."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"expected an existing directory, got {text!r} ({_what_is(path)})")
    return path


def existing_file(text: str) -> Path:
    """An argparse ``type=``: a file that exists."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"expected an existing file, got {text!r} ({_what_is(path)})")
    return path


def _what_is(path: Path) -> str:
    if not path.exists():
        return "no such file or directory"
    return "a directory" if path.is_dir() else "not a directory"


def top_errors(errors_by_class: Mapping[str, int], *, n: int = 3) -> str:
    """``"dns_nxdomain=12, ssrf_blocked=3"``: the ``n`` most frequent error classes, or "no errors recorded"."""
    top = sorted(errors_by_class.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return ", ".join(f"{k}={v}" for k, v in top) if top else "no errors recorded"
