"""The parse guard: which page a parser process was working on when it died, and a CPU limit per page.

HTML parsers are native code, and hostile pages break them in two ways a ``try`` cannot catch: a crash
(lexbor has had several segfaults on real pages) and a runaway parse. The second is not rare: the
HTML tree builder checks the stack of open elements for every block start tag, so a page of nested
``<ul>`` or ``<div>`` costs the square of its depth. Measured with this crawler's extractor: 100,000
nested ``<div>`` take 8.5 s, 200,000 take 69 s, and 1.6 MB of ``<ul>`` (400,000) take 454 s.

A process that parses pages wraps each page in ``ParseGuard.page``:

* before the parse it writes the page's key (a number and the URL) to its own marker file, and arms a
  CPU-time timer; after the parse it disarms the timer and clears the marker. Four system calls a page.
* the timer is ``ITIMER_PROF`` left at its default action: a page that uses more than ``cpu_limit_s``
  of CPU ends the process with SIGPROF, even inside native code where no Python handler could run.
  CPU time, not wall time, so that a loaded machine does not make a normal page look hostile.

Whoever watches the process (``ParsePool`` for the embedded crawl, the link service for the fleet's
extract job) reads the marker after a death with ``culprit``: it names the page in hand, or nothing
when the process died between pages. The marker is written without fsync: it must survive the
process, not the machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_HEAD = struct.Struct("!qI")  # the page's key, the URL's length in bytes (0: no page in hand)
_NONE = _HEAD.pack(0, 0)
_MAX_URL = 8192
# Deaths of a parsing process on one page that make the page hostile: one may be bad luck (a process
# killed for another reason while it had the page in hand). Parse processes, fetch processes and the
# fleet's link service all count to this.
STRIKES = 2
DEFAULT_CPU_LIMIT_S = 3.0  # a dense 2 MB page parses in about 0.1 s; see the module docstring


@dataclass(frozen=True, slots=True)
class Culprit:
    """The page a dead parser process had in hand."""

    key: int
    url: str


class ParseGuard:
    """One process's marker file and CPU timer. ``cpu_limit_s`` <= 0 disables the timer only."""

    def __init__(self, marker: Path | str, *, cpu_limit_s: float = DEFAULT_CPU_LIMIT_S) -> None:
        self.path = Path(marker)
        self.cpu_limit_s = cpu_limit_s
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.pwrite(self._fd, _NONE, 0)
        # Default action, whatever an embedding program installed: a Python handler would only run
        # once the native parse returned, which is what the timer exists to not wait for. (Only the
        # main thread may set it; elsewhere the process's disposition stands.)
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGPROF, signal.SIG_DFL)

    @contextlib.contextmanager
    def page(self, key: int, url: str) -> Iterator[None]:
        """Mark ``url`` (with ``key``) as the page in hand for the duration of the block."""
        self.enter(key, url)
        try:
            yield
        finally:
            self.leave()

    def enter(self, key: int, url: str) -> None:
        """``page`` without a context manager, for a loop over many pages (a parse process's bundle):
        ``url`` is the page in hand and its CPU timer runs until ``leave``, which must follow."""
        raw = url.encode("utf-8", "replace")[:_MAX_URL]
        os.pwrite(self._fd, _HEAD.pack(key, len(raw)) + raw, 0)
        if self.cpu_limit_s > 0:
            signal.setitimer(signal.ITIMER_PROF, self.cpu_limit_s)

    def leave(self) -> None:
        """No page in hand any more (``enter``)."""
        if self.cpu_limit_s > 0:
            signal.setitimer(signal.ITIMER_PROF, 0)
        os.pwrite(self._fd, _NONE, 0)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def culprit(marker: Path | str) -> Culprit | None:
    """The page the process writing ``marker`` had in hand when it stopped, or None (between pages, no
    marker, or a marker torn by a crash in the middle of a write)."""
    try:
        raw = Path(marker).read_bytes()
    except OSError:
        return None
    if len(raw) < _HEAD.size:
        return None
    key, size = _HEAD.unpack_from(raw)
    if size == 0 or size > _MAX_URL or len(raw) < _HEAD.size + size:
        return None
    return Culprit(key, raw[_HEAD.size : _HEAD.size + size].decode("utf-8", "replace"))


def describe_death(returncode: int | None, *, cpu_limit_s: float) -> str:
    """One phrase for how a parser process ended, for the page's recorded error."""
    if returncode is not None and returncode < 0:
        sig = -returncode
        if sig == signal.SIGPROF:
            return f"the parse used more than {cpu_limit_s:g} s of CPU"
        with contextlib.suppress(ValueError):
            return f"the parser process died of {signal.Signals(sig).name}"
        return f"the parser process died of signal {sig}"
    if returncode is None:
        return "the parser process stopped answering and was killed"
    return f"the parser process exited with code {returncode}"


def page_error(why: str, deaths: int) -> str:
    """The recorded error of a page kept without links after ``deaths`` parser deaths (``why``: the last)."""
    return f"parse_failed: {why}, {deaths} times; its links were not extracted"


def host_error(pages: int) -> str:
    """The recorded error of a page not parsed because ``pages`` pages of its host killed parsers."""
    return (f"parse_failed: {pages} pages of this host killed parser processes; "
            "its pages are kept without parsing")  # fmt: skip

