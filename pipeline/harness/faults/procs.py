"""Processes the fault harness starts, kills, stops, resumes and restarts — only its own, by pid.

Every process runs in a session of its own (``start_new_session``), so a kill reaches the children a
launcher script forks (a JVM under a shell, beam under rabbitmq-server) and nothing else: the
harness signals the process group it created, never a name pattern.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


class HarnessError(RuntimeError):
    pass


def python_cmd(*args: str) -> list[str]:
    """``python -m pipeline.cli ARGS`` with this interpreter."""
    return [sys.executable, "-m", "pipeline.cli", *args]


@dataclass(slots=True)
class Managed:
    """One restartable process: its command, environment and log file (stdout and stderr appended)."""

    name: str
    cmd: list[str]
    env: dict[str, str]
    log_path: Path
    stdout_path: Path | None = None  # stdout apart (e.g. a JSON summary); else into log_path
    cwd: Path = ROOT
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    history: list[tuple[str, float]] = field(default_factory=list)
    struck: frozenset[int] = frozenset()  # the processes the last signal reached

    def start(self, cmd: Sequence[str] | None = None) -> Managed:
        if self.running:
            raise HarnessError(f"{self.name} is already running")
        if cmd is not None:
            self.cmd = list(cmd)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            out = open(self.stdout_path, "ab") if self.stdout_path else log  # noqa: SIM115 - closed below
            try:
                self.proc = subprocess.Popen(self.cmd, env=self.env, cwd=self.cwd, stdout=out, stderr=log,
                                             stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
            finally:
                if out is not log:
                    out.close()
        self.starts += 1
        self.history.append(("start", time.time()))
        return self

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise HarnessError(f"{self.name} was never started")
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> float:
        """Send ``sig`` to the process group; returns the time it was sent. ``struck`` names the group's
        processes the signal reached (the fault injector's own record of which processes it struck)."""
        alive = self.proc is not None and self.proc.returncode is None
        self.struck = group_pids(self.pid) if alive else frozenset()
        t = time.time()
        if not alive:
            _sweep_group(self.pid, sig)  # the leader is reaped: its number may be someone else's now
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
        self.history.append((signal.Signals(sig).name, t))
        return t

    def kill(self) -> float:
        """SIGKILL the group and reap it; returns the time the signal was sent (nothing of the group
        ran after it)."""
        t = self.signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(30)
        return t

    def pause(self) -> float:
        return self.signal(signal.SIGSTOP)

    def resume(self) -> float:
        return self.signal(signal.SIGCONT)

    def terminate(self, *, timeout_s: float = 20.0) -> int | None:
        """SIGCONT + SIGTERM, then SIGKILL after ``timeout_s``; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGCONT)
                os.killpg(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait(10)
        # Children that ignored the TERM (a JVM under a launcher) go with the group.
        _sweep_group(self.pid, signal.SIGKILL)
        return self.proc.returncode

    def wait(self, timeout_s: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout_s)

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def _sweep_group(pgid: int, sig: int) -> None:
    """Signal what is left of a process group whose leader has been reaped.

    Linux keeps a group's number from reuse only while some member lives. Once the group is empty the
    number can become a new process's pid and, with ``start_new_session``, its own group (pid_max is
    32768 on these machines and a fault trial starts hundreds of processes), so a blind ``killpg``
    could kill a stranger, such as the next trial's dispatcher. A live process whose pid is the group
    number means exactly that: the group is no longer ours.
    """
    if os.path.exists(f"/proc/{pgid}"):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_pids(pgid: int) -> frozenset[int]:
    """Every live process of the process group ``pgid`` (read from /proc)."""
    out: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "(comm)": state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            out.add(int(entry.name))
    return frozenset(out)


def wait_until(pred: Callable[[], bool], *, timeout_s: float, every_s: float = 0.05, what: str = "condition") -> None:
    """Poll ``pred`` until true; HarnessError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise HarnessError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(every_s)


def peak_rss_mb(pid: int) -> float | None:
    """The process's resident-set high-water mark (VmHWM) so far, in MB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None
