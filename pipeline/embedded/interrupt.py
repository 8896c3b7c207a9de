"""Ctrl-C for the embedded crawl: the first stops new requests, the second quits at once.

Contracts (the engine keeps them, see ``pipeline.embedded.engine``):
- First SIGINT (or SIGTERM): no new request is sent from then on (every fetcher's fence says no, so URLs
  not yet sent come back unfetched and stay pending); requests already on the wire get ``grace_s``
  (2 s plus the read timeout) to finish, then are abandoned (their URLs stay pending too, and are
  named in the summary's ``abandoned``; so is a URL still held by its host's pacing then, e.g. a
  Crawl-delay longer than the grace, though it never reached the wire). Everything that had a result is journaled and applied; the
  crawl ends normally with ``interrupted: true``; the CLI prints how to resume and exits 130.
- Second SIGINT: ``on_force`` runs (it flushes what is buffered outside the journal, e.g. WARC) and the
  process exits 130 at once. The journal writes each result to the OS as it arrives, so nothing
  journaled is lost: ``--resume`` replays it.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a Ctrl-C'd command
EXTRA_GRACE_S = 2.0


class Interrupt:
    """Counts stop signals. ``stopping`` after the first; the second calls ``on_force`` and exits."""

    def __init__(
        self,
        *,
        grace_s: float,
        on_stop: Callable[[], None],
        on_force: Callable[[], None] = lambda: None,
        err: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        exit_now: Callable[[int], Any] = os._exit,
    ) -> None:
        self.grace_s = grace_s
        self._on_stop, self._on_force = on_stop, on_force
        self._err = err
        self._clock = clock
        self._exit_now = exit_now
        self.signals = 0
        self.deadline: float | None = None  # when requests still in flight are abandoned

    @property
    def stopping(self) -> bool:
        return self.signals > 0

    def fence(self) -> bool:
        """True while new requests may be sent (a fetcher asks before each one)."""
        return self.signals == 0

    def overdue(self) -> bool:
        return self.deadline is not None and self._clock() >= self.deadline

    def signal(self) -> None:
        self.signals += 1
        err = self._err or sys.stderr
        if self.signals == 1:
            self.deadline = self._clock() + self.grace_s
            print(f"stopping: no new requests; waiting up to {self.grace_s:g} s for those in flight "
                  "(Ctrl-C again to quit at once)", file=err, flush=True)  # fmt: skip
            self._on_stop()
            return
        print("quitting now (second Ctrl-C); journaled results are kept", file=err)
        print(f"interrupted; resume with: {resume_command(sys.argv)}", file=err, flush=True)
        try:
            self._on_force()
        finally:
            self._exit_now(EXIT_INTERRUPTED)


def resume_command(argv: Sequence[str]) -> str:
    """The command line that resumes the crawl ``argv`` (``sys.argv``) started: the same, plus ``--resume``."""
    prog = Path(argv[0]).name if argv else "crawlfleet"
    head = ["crawlfleet"] if prog == "crawlfleet" else [sys.executable, "-m", "pipeline.cli"]
    args = list(argv[1:])
    if "--resume" not in args:
        args.append("--resume")
    return shlex.join(head + args)


def finish(summary: Mapping[str, Any], argv: Sequence[str], *, err: TextIO | None = None) -> int:
    """After the summary is printed: for an interrupted crawl say how to resume (and which requests were
    abandoned) and return 130; 0 otherwise."""
    if not summary.get("interrupted"):
        return 0
    err = err or sys.stderr
    abandoned = summary.get("abandoned") or []
    if abandoned:
        print(f"abandoned {len(abandoned)} URLs unfinished at the deadline (on the wire, or waiting for their "
              "host's turn); they stay pending: " + " ".join(abandoned), file=err)  # fmt: skip
    print(f"interrupted; resume with: {resume_command(argv)}", file=err, flush=True)
    return EXIT_INTERRUPTED
