"""CPU of the store's JVMs on this box (HBase standalone: master + region server, and its Thrift gateway),
read from /proc, so a bench can say what each half of a run cost the store.

The store is a shared service, not a child of the bench: ``resource.getrusage`` and the bench's cgroup never
see it. ``JvmCpu.sample()`` sums user + system time of every live process whose command line runs an
``org.apache.hadoop.hbase`` main class, per thread, and sorts threads into what they do (Java names its
threads, and Linux keeps the first 15 bytes): garbage collection (``GC Thread``, ``G1 ...``), the JIT
(``C1/C2 CompilerThread``), the region server's RPC handlers (``RpcServer...``), and the rest. Two samples
give a ``JvmCpuDelta``. A store on another machine shows as zero processes, not as an error.

May import: nothing of crawlfleet. I/O: /proc only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
MAIN_CLASS_MARK = b"org.apache.hadoop.hbase"
KINDS = ("gc", "jit", "rpc", "other")


def thread_kind(name: str) -> str:
    """What a JVM thread (its /proc comm name) spends CPU on: one of ``KINDS``."""
    if name.startswith(("GC Thread", "G1 ", "VM Thread")):
        return "gc"
    if "CompilerThre" in name:
        return "jit"
    if name.startswith("RpcServer"):
        return "rpc"
    return "other"


@dataclass(frozen=True, slots=True)
class JvmCpuSample:
    processes: int
    seconds: dict[str, float] = field(default_factory=dict)  # kind -> CPU seconds so far


@dataclass(frozen=True, slots=True)
class JvmCpuDelta:
    processes: int
    seconds: dict[str, float]

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())

    def to_json(self, pages: int) -> dict[str, object]:
        """Totals and the per-page cost (ms) for a bench's JSON."""
        return {
            "processes": self.processes,
            "cpu_s": round(self.total_s, 2),
            "cpu_ms_per_page": round(1000 * self.total_s / max(1, pages), 4),
            "by_kind_s": {k: round(v, 2) for k, v in self.seconds.items()},
        }


def sample(proc: Path = PROC) -> JvmCpuSample:
    """CPU seconds so far of every local HBase JVM, by thread kind."""
    tick = os.sysconf("SC_CLK_TCK")
    totals = dict.fromkeys(KINDS, 0.0)
    found = 0
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            if MAIN_CLASS_MARK not in (entry / "cmdline").read_bytes():
                continue
            tasks = list((entry / "task").iterdir())
        except OSError:  # gone, or not ours to read
            continue
        found += 1
        for task in tasks:
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            totals[thread_kind(name)] += (int(fields[11]) + int(fields[12])) / tick
    return JvmCpuSample(found, totals)


def delta(before: JvmCpuSample, after: JvmCpuSample) -> JvmCpuDelta:
    """CPU between two samples (a thread that ended in between loses its share: JVM threads of a running
    store live as long as it does, so this undercounts by little)."""
    return JvmCpuDelta(
        after.processes, {k: max(0.0, after.seconds.get(k, 0.0) - before.seconds.get(k, 0.0)) for k in KINDS}
    )
