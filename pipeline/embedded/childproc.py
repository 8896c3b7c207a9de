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
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.settings import Settings


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask (``taskset``, a container's cpuset), not the
    machine's count, which ``os.cpu_count`` gives and which overstates a pinned or confined crawl."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity call on this platform
        return os.cpu_count() or 1


def parse_processes_for(settings: Settings, *, fetch_processes: int) -> int:
    """Parse processes for the embedded crawl: ``fetch.parse_processes``, or, when negative, one per
    spare core, at least one and at most two (past two the crawl's own process is the bottleneck).
    One even without a spare core: a page that kills or stalls its parser then costs a parse process
    and its own links, never the crawl (``pipeline.links.guard``); on one core it costs about 6% more
    CPU per page and no pages/s (docs/bench/local.md, 2026-11-25). None when fetch processes run: they
    prepare their results themselves."""
    if fetch_processes > 0:
        return 0
    wanted = settings.fetch.parse_processes
    if wanted >= 0:
        return wanted
    return max(1, min(2, usable_cpus() - 1))


def spawn_module(
    module: str, *, buffer_bytes: int = 0, import_path: bool = False
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Run ``python -m module FD``; returns the process and the parent's end of the socket pair.
    ``buffer_bytes`` > 0 widens both ends' socket buffers (capped by net.core.wmem_max / rmem_max).
    ``import_path``: the child imports from this process's ``sys.path`` too (the crawl's plugins are
    pickled to it, and must be importable wherever the program that embeds the crawl found them)."""
    env = None
    if import_path:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [*sys.path, env.get("PYTHONPATH", "")] if p)
    ours, theirs = socket.socketpair()
    if buffer_bytes > 0:
        for sock in (ours, theirs):
            for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, opt, buffer_bytes)
    try:
        proc = subprocess.Popen([sys.executable, "-m", module, str(theirs.fileno())], pass_fds=[theirs.fileno()], env=env)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return proc, ours


class RestartBudget:
    """How often a crawl helper may die of itself and be started again: at most ``deaths`` such deaths
    within ``window_s``; a helper that dies in a loop is broken. Per minute, not per crawl: the owner
    starts a helper again once its window has room. A death the guard blames on the page in hand
    (``pipeline.links.guard``) does not count against it: strikes bound those (two per page, and a
    host's pages are not parsed after ``fetch.parse_failed_per_host``), and a storm of hostile pages
    must not leave the crawl without its helpers."""

    def __init__(self, *, deaths: int = 6, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.deaths, self.window_s = deaths, window_s
        self.clock = clock
        self.total = 0  # every death, blamed or not
        self._at: deque[float] = deque()

    def died(self, now: float | None = None, *, blamed: bool = False) -> None:
        self.total += 1
        if not blamed:
            self._at.append(self.clock() if now is None else now)

    def may_restart(self, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        while self._at and now - self._at[0] > self.window_s:
            self._at.popleft()
        return len(self._at) < self.deaths
