"""CPU seconds of a running process, sampled over wall time, so a bench can charge a process only for a
window of its life (for example the fleet dispatcher between its first batch and its last reply,
leaving out interpreter start-up, imports and shutdown, which a long crawl amortises to nothing).

The sampler is a daemon thread reading ``psutil.Process.cpu_times()`` (user + system, all threads)
every ``period_s``; ``between(t0, t1)`` interpolates linearly between the samples around each instant.
Its error is at most one period's CPU at each end, which the bench reports next to the figure.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

import psutil


class CpuTrace:
    """Samples of (wall time, CPU seconds) for one process until it exits or ``stop()``."""

    def __init__(self, pid: int, *, period_s: float = 0.2, wall: Callable[[], float] = time.time) -> None:
        self._proc = psutil.Process(pid)
        self._period = period_s
        self._wall = wall
        self.times: list[float] = []
        self.cpu: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"cputrace:{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ct = self._proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                return  # it ended: the last sample stands for its end
            self.times.append(self._wall())
            self.cpu.append(ct.user + ct.system)
            self._stop.wait(self._period)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, t: float) -> float:
        """CPU seconds used by ``t`` (wall time), interpolated; clamped to the first and last samples."""
        return cpu_at(self.times, self.cpu, t)

    def between(self, t0: float, t1: float) -> float:
        return self.at(t1) - self.at(t0)


def cpu_at(times: list[float], cpu: list[float], t: float) -> float:
    """Linear interpolation of the samples ``(times[i], cpu[i])`` (ascending ``times``) at ``t``."""
    if not times:
        return float("nan")
    i = bisect.bisect_left(times, t)
    if i == 0:
        return cpu[0]
    if i >= len(times):
        return cpu[-1]
    t0, t1, c0, c1 = times[i - 1], times[i], cpu[i - 1], cpu[i]
    return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1
