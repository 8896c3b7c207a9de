"""CPU seconds of a running process, sampled over wall time, so a bench can charge a process only for a
window of its life (for example the fleet dispatcher between its first batch and its last reply,
leaving out interpreter start-up, imports and shutdown, which a long crawl amortises to nothing).

The sampler is a daemon thread reading ``psutil.Process.cpu_times()`` (user + system, all threads)
every ``period_s``; ``between(t0, t1)`` interpolates linearly between the samples around each instant.
Its error is at most one period's CPU at each end, which the bench reports next to the figure.

``bucket_series`` and ``fit_rates`` split a process's CPU into a per-page and a per-second part:
over intervals of a steady window, CPU = a·pages + b·seconds by least squares. One run then gives
both the marginal cost of a page and the cost of the process's timers, which a single CPU/pages
ratio mixes (at a low page rate the timers dominate it).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil


class CpuTrace:
    """Samples of (wall time, CPU seconds) for one process until it exits or ``stop()``.

    ``tree=True`` counts its descendants too: the live ones as sampled, the reaped ones through the
    process's ``children_*`` times (a worker process, like ``crawlfleet links``' extract worker, is part of
    the service's cost). A descendant reaped between two reads may be missed or counted twice within one
    sample; the error is one sample's worth of its CPU."""

    def __init__(
        self, pid: int, *, period_s: float = 0.2, wall: Callable[[], float] = time.time, tree: bool = False
    ) -> None:
        self._proc = psutil.Process(pid)
        self._tree = tree
        self._period = period_s
        self._wall = wall
        self.times: list[float] = []
        self.cpu: list[float] = []
        self.own: list[float] = []  # the process's own CPU at each sample (``cpu`` less its descendants')
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"cputrace:{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ct = self._proc.cpu_times()
                own = used = ct.user + ct.system
                if self._tree:
                    used += ct.children_user + ct.children_system + _live_descendants_cpu(self._proc)
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                return  # it ended: the last sample stands for its end
            self.times.append(self._wall())
            self.cpu.append(used)
            self.own.append(own)
            self._stop.wait(self._period)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, t: float) -> float:
        """CPU seconds used by ``t`` (wall time), interpolated; clamped to the first and last samples."""
        return cpu_at(self.times, self.cpu, t)

    def between(self, t0: float, t1: float) -> float:
        return self.at(t1) - self.at(t0)


def _live_descendants_cpu(proc: psutil.Process) -> float:
    total = 0.0
    for child in proc.children(recursive=True):
        try:
            ct = child.cpu_times()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue  # gone: its time is in its parent's children_* once reaped
        total += ct.user + ct.system
    return total


def cpu_at(times: Sequence[float], cpu: Sequence[float], t: float) -> float:
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


@dataclass(frozen=True, slots=True)
class CpuRates:
    """CPU = ``per_page_s``·pages + ``per_s``·seconds, fitted over a window of ``buckets`` intervals.

    ``per_page_s`` is the marginal cost of one more page (decoding its reply, settling it, leasing and
    sending its share of a batch); ``per_s`` is what the process burns per second whether pages flow
    or not (timers, polling, heartbeats). ``r2`` is the fit's coefficient of determination on the
    bucket CPU (nan when the buckets' CPU does not vary)."""

    per_page_s: float
    per_s: float
    buckets: int
    r2: float


def bucket_series(
    times: Sequence[float],
    cpu: Sequence[float],
    events: Sequence[tuple[float, int]],
    *,
    t0: float,
    t1: float,
    bucket_s: float,
) -> list[tuple[float, float, float]]:
    """(CPU seconds, pages, seconds) per interval of ``bucket_s`` in [t0, t1]; ``events`` are (wall
    time, pages) points (a batch's reply), counted in the interval they fall in. A last partial
    interval shorter than half a bucket joins the one before."""
    if not times or t1 <= t0 or bucket_s <= 0:
        return []
    n = max(1, round((t1 - t0) / bucket_s))
    edges = [t0 + (t1 - t0) * i / n for i in range(n + 1)]
    pages = [0.0] * n
    for t, p in events:
        if t0 <= t <= t1:
            pages[min(n - 1, bisect.bisect_right(edges, t) - 1)] += p
    tl, cl = list(times), list(cpu)
    at = [cpu_at(tl, cl, e) for e in edges]
    return [(at[i + 1] - at[i], pages[i], edges[i + 1] - edges[i]) for i in range(n)]


def fit_rates(series: Sequence[tuple[float, float, float]]) -> CpuRates:
    """Least squares of cpu = a·pages + b·seconds over the buckets (no intercept), both rates >= 0:
    when the unconstrained fit makes one negative, the better of the two one-rate fits is taken.
    nan rates when there are fewer than two buckets."""
    if len(series) < 2:
        return CpuRates(float("nan"), float("nan"), len(series), float("nan"))
    spp = sum(p * p for _, p, _ in series)
    sdd = sum(d * d for _, _, d in series)
    spd = sum(p * d for _, p, d in series)
    scp = sum(c * p for c, p, _ in series)
    scd = sum(c * d for c, _, d in series)
    det = spp * sdd - spd * spd
    a = b = -1.0
    if det > 1e-12 * max(1.0, spp * sdd):
        a, b = (scp * sdd - scd * spd) / det, (scd * spp - scp * spd) / det
    if a < 0 or b < 0:
        only_pages = (scp / spp if spp > 0 else 0.0, 0.0)
        only_time = (0.0, scd / sdd if sdd > 0 else 0.0)
        a, b = min((only_pages, only_time), key=lambda ab: _sse(series, *ab))
    a, b = max(0.0, a), max(0.0, b)
    mean = sum(c for c, _, _ in series) / len(series)
    sst = sum((c - mean) ** 2 for c, _, _ in series)
    r2 = 1 - _sse(series, a, b) / sst if sst > 0 else float("nan")
    return CpuRates(a, b, len(series), r2)


def _sse(series: Sequence[tuple[float, float, float]], a: float, b: float) -> float:
    return sum((c - a * p - b * d) ** 2 for c, p, d in series)
