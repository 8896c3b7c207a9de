"""CPU of the cluster services on this box (HDFS, YARN, Spark standalone) and of everything they run, from /proc.

A link job on YARN or Spark runs in processes the bench never starts: YARN's NodeManager starts a container
(a JVM and the Python of its streaming tasks), Spark's worker starts an executor JVM and its Python workers.
``sample()`` sums user + system time of every live process whose command line runs a Hadoop or Spark main
class, together with the CPU of the children each has reaped (``cutime``/``cstime``), and of every live
descendant of one: the containers and executors while they run, and once they are gone, in their parent's
reaped time. Grouped by what runs them: ``hdfs`` (NameNode, DataNode), ``yarn`` (ResourceManager,
NodeManager and its containers), ``spark`` (master, worker and its executors). Two samples give the CPU
between them. A cluster on other machines shows as zero processes.

May import: nothing of crawlfleet. I/O: /proc only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
MARKS: tuple[tuple[str, bytes], ...] = (
    ("hdfs", b"org.apache.hadoop.hdfs.server"),
    ("yarn", b"org.apache.hadoop.yarn.server"),
    ("spark", b"org.apache.spark.deploy.master"),
    ("spark", b"org.apache.spark.deploy.worker"),
)
KINDS = tuple(dict.fromkeys(kind for kind, _ in MARKS))


@dataclass(frozen=True, slots=True)
class ClusterCpu:
    processes: int
    seconds: dict[str, float] = field(default_factory=dict)  # kind -> CPU seconds so far

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())

    def minus(self, before: ClusterCpu) -> ClusterCpu:
        return ClusterCpu(self.processes, {k: max(0.0, self.seconds.get(k, 0.0) - before.seconds.get(k, 0.0))
                                           for k in KINDS})  # fmt: skip

    def to_json(self, pages: int) -> dict[str, object]:
        return {"processes": self.processes, "cpu_s": round(self.total_s, 2),
                "cpu_ms_per_page": round(1000 * self.total_s / max(1, pages), 4),
                "by_kind_s": {k: round(v, 2) for k, v in self.seconds.items()}}  # fmt: skip


def _stat(entry: Path) -> tuple[int, float] | None:
    """(parent pid, own + reaped children's CPU seconds) of a process, or None when it is gone."""
    try:
        text = (entry / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / tick


def sample(proc: Path = PROC) -> ClusterCpu:
    """CPU seconds so far of the cluster's processes and every live descendant of one, by kind."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    kind_of: dict[int, str] = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        st = _stat(entry)
        if st is None:
            continue
        pid = int(entry.name)
        parents[pid], cpu[pid] = st
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        for kind, mark in MARKS:
            if mark in cmd:
                kind_of[pid] = kind
                break
    totals = dict.fromkeys(KINDS, 0.0)
    for pid, seconds in cpu.items():
        owner, seen = pid, 0
        while owner not in kind_of and owner in parents and seen < 64:  # the nearest cluster ancestor
            owner, seen = parents[owner], seen + 1
        if owner in kind_of:
            totals[kind_of[owner]] += seconds
    return ClusterCpu(len(kind_of), totals)
