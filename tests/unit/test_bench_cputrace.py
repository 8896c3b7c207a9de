"""The bench's CPU-in-a-window arithmetic, and the sampler on a real process."""

from __future__ import annotations

import math
import subprocess
import sys
import time

from pipeline.harness.bench.cputrace import CpuTrace, cpu_at


def test_cpu_at_interpolates_between_samples_and_clamps_outside() -> None:
    times, cpu = [10.0, 11.0, 13.0], [1.0, 1.5, 3.5]
    assert cpu_at(times, cpu, 10.5) == 1.25
    assert cpu_at(times, cpu, 12.0) == 2.5
    assert cpu_at(times, cpu, 9.0) == 1.0
    assert cpu_at(times, cpu, 20.0) == 3.5
    assert math.isnan(cpu_at([], [], 1.0))


def test_trace_charges_a_busy_child_more_than_a_sleeping_one() -> None:
    busy = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.process_time()\nwhile time.process_time()-t<0.6: pass"]
    )
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"])
    traces = CpuTrace(busy.pid, period_s=0.05), CpuTrace(idle.pid, period_s=0.05)
    t0 = time.time()
    busy.wait(30)
    idle.wait(30)
    for tr in traces:
        tr.stop()
    busy_cpu, idle_cpu = (tr.between(t0 - 1.0, time.time()) for tr in traces)
    assert busy_cpu > idle_cpu + 0.2


def test_a_tree_trace_counts_the_work_of_a_process_s_child() -> None:
    """The parent sleeps while its child burns 0.5 s of CPU: only ``tree=True`` charges the parent for it
    (``crawlfleet links`` does its extraction in such a child)."""
    burn = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.5: pass"
    parent = subprocess.Popen(
        [sys.executable, "-c",
         f"import subprocess, sys, time\nc = subprocess.Popen([sys.executable, '-c', {burn!r}])\n"
         "time.sleep(0.2)\nwhile c.poll() is None: time.sleep(0.05)\ntime.sleep(0.5)"]
    )  # fmt: skip
    tree, alone = CpuTrace(parent.pid, period_s=0.05, tree=True), CpuTrace(parent.pid, period_s=0.05)
    t0 = time.time()
    parent.wait(60)
    for trace in (tree, alone):
        trace.stop()
    assert tree.between(t0, time.time()) >= 0.4 > alone.between(t0, time.time()) + 0.2
