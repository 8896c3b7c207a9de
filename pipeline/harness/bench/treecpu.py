"""CPU seconds of a process tree, every descendant included, also those that outlive their parent.

``resource.getrusage(RUSAGE_CHILDREN)`` counts only children that were waited for, and their own waited-for
children. Spark's and Hadoop's runners start JVMs whose Python workers and daemons are not always reaped by
the process that started them (the JVM exits first; init reaps them), so their CPU escapes that count
(measured: Spark's extract job "used" less CPU than the bare loop it wraps). A cgroup counts every task in
it, however it ends: ``TreeCpu`` moves this process into a cpuacct cgroup of its own (cgroup v1, where the
machine has one and we may write it), so everything it starts lands there, and reads ``cpuacct.usage``
(user + system, nanoseconds). Where that is not possible it falls back to rusage (self + reaped children)
and says so in ``method``.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class TreeCpu:
    """``seconds()``: CPU of this process and all it started since ``__init__``; ``close()`` leaves the cgroup."""

    def __init__(self, *, root: Path = CPUACCT) -> None:
        self.method = "rusage (self + reaped children)"
        self._home, self._group = _enter(root, f"crawlfleet-bench-{os.getpid()}", os.getpid())
        if self._group is not None:
            self.method = f"cgroup v1 cpuacct.usage of {self._group} (every descendant, reaped or not)"

    def seconds(self) -> float:
        if self._group is not None:
            return int((self._group / "cpuacct.usage").read_text()) / 1e9
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def others(self) -> list[int]:
        """Processes in the cgroup besides this one (leftovers of a runner still charging CPU)."""
        if self._group is None:
            return []
        pids = (int(x) for x in (self._group / "cgroup.procs").read_text().split())
        return [p for p in pids if p != os.getpid()]

    def settle(self, *, timeout_s: float = 30.0) -> int:
        """Wait until only this process is left in the cgroup (or ``timeout_s``); the leftovers' count."""
        end = time.monotonic() + timeout_s
        while (left := self.others()) and time.monotonic() < end:
            time.sleep(0.2)
        return len(left)

    def close(self) -> None:
        if self._group is None or self._home is None:
            return
        with contextlib.suppress(OSError):
            (self._home / "cgroup.procs").write_text(str(os.getpid()))
            self._group.rmdir()  # fails while a leftover process is still in it; the kernel keeps it then
        self._group = None


class GroupCpu:
    """The CPU of one started process and everything it starts from then on, reaped or not: the process is
    moved into a cpuacct cgroup of its own (cgroup v1) as soon as it is started, before it forks anything.
    ``seconds()`` is None where that is not possible (no such hierarchy, no right to write it)."""

    def __init__(self, pid: int, *, root: Path = CPUACCT) -> None:
        self._home, self._group = _enter(root, f"crawlfleet-bench-tree-{pid}", pid)

    def seconds(self) -> float | None:
        if self._group is None:
            return None
        return int((self._group / "cpuacct.usage").read_text()) / 1e9

    def close(self, *, timeout_s: float = 30.0) -> None:
        """Remove the group once its processes are gone (the kernel keeps it while one lingers)."""
        if self._group is None or self._home is None:
            return
        end = time.monotonic() + timeout_s
        while (self._group / "cgroup.procs").read_text().split() and time.monotonic() < end:
            time.sleep(0.2)
        with contextlib.suppress(OSError):
            self._group.rmdir()
        self._group = None


def _enter(root: Path, name: str, pid: int) -> tuple[Path | None, Path | None]:
    """Move ``pid`` into a new cpuacct cgroup ``name``: (the cgroup it came from, the new one), or
    (None, None) where that is not possible."""
    try:
        home = _current(root)
        group = root / name
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(pid))
    except OSError:
        return None, None
    return home, group


def _current(root: Path) -> Path:
    """This process's cpuacct cgroup directory (OSError when there is no cgroup v1 cpuacct hierarchy)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            found = root / path.lstrip("/")
            if found.is_dir():
                return found
    raise OSError("no cpuacct cgroup")
