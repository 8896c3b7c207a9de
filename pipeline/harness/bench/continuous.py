"""A ``crawlfleet crawl --continuous`` run as a child process, ended the way a user ends one: by its stop
file. For the freshness bench and the end-to-end tests of continuous crawling."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType


class ContinuousCrawl:
    """Starts ``cmd`` (which must name ``stop_file`` as its ``--stop-file``) on entry; ``stop`` creates the
    file and waits for the crawl to finish. Leaving the block any other way kills the crawl, so a failing
    caller never leaves one running."""

    def __init__(self, cmd: Sequence[str], stop_file: Path, *, env: Mapping[str, str] | None = None) -> None:
        self.cmd = list(cmd)
        self.stop_file = stop_file
        self.env = dict(env) if env is not None else None
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> ContinuousCrawl:
        self.stop_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            self.cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stderr_tail(self, n: int = 3000) -> str:
        """What an ended crawl wrote to stderr (only once it has ended: reading waits for EOF)."""
        if self.proc is None or self.proc.stderr is None or self.running():
            return ""
        return self.proc.stderr.read()[-n:]

    def stop(self, *, timeout_s: float = 60.0) -> tuple[int, str, str]:
        """Create the stop file and wait for the crawl to end: (exit code, stdout, stderr)."""
        assert self.proc is not None, "not started"
        self.stop_file.write_text("")
        stdout, stderr = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, stdout, stderr

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
