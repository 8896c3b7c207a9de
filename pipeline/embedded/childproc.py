"""Start a crawl helper process (fetch or parse) as ``python -m MODULE FD`` over a socket pair.

Not multiprocessing's spawn: spawn re-imports the parent's ``__main__``, which re-runs any script that
embeds a crawl without a ``__main__`` guard; and never fork a process that has an event loop and
threads running. The child gets its end of the pair as file descriptor ``FD`` (its only argument).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections import deque


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask (``taskset``, a container's cpuset), not the
    machine's count, which ``os.cpu_count`` gives and which overstates a pinned or confined crawl."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity call on this platform
        return os.cpu_count() or 1


def spawn_module(module: str, *, buffer_bytes: int = 0) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Run ``python -m module FD``; returns the process and the parent's end of the socket pair.
    ``buffer_bytes`` > 0 widens both ends' socket buffers (capped by net.core.wmem_max / rmem_max)."""
    ours, theirs = socket.socketpair()
    if buffer_bytes > 0:
        for sock in (ours, theirs):
            for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, opt, buffer_bytes)
    try:
        proc = subprocess.Popen([sys.executable, "-m", module, str(theirs.fileno())], pass_fds=[theirs.fileno()])
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return proc, ours


class RestartBudget:
    """How often a crawl helper may die and be started again: at most ``deaths`` deaths within
    ``window_s``. Per minute, not per crawl: a hostile page costs a helper two deaths at most
    (``pipeline.links.guard``), and a long crawl meets many; a helper that dies in a loop is broken."""

    def __init__(self, *, deaths: int = 6, window_s: float = 60.0) -> None:
        self.deaths, self.window_s = deaths, window_s
        self.total = 0
        self._at: deque[float] = deque()

    def died(self, now: float | None = None) -> None:
        self.total += 1
        self._at.append(time.monotonic() if now is None else now)

    def may_restart(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        while self._at and now - self._at[0] > self.window_s:
            self._at.popleft()
        return len(self._at) < self.deaths
