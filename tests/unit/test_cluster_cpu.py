"""The cluster's CPU (pipeline.harness.bench.clustercpu) on a hand-made /proc: each cluster daemon and
every descendant of one (a YARN container and its streaming task) counted under the daemon's service,
reaped children's time included, other processes left out; two samples give the CPU between them."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.harness.bench import clustercpu

TICK = os.sysconf("SC_CLK_TCK")


def proc_entry(root: Path, pid: int, ppid: int, cmd: bytes, *, utime: int, stime: int = 0, cutime: int = 0) -> None:
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    # /proc/PID/stat: pid (comm) state ppid ... fields 14-17 (1-based) are utime stime cutime cstime
    rest = ["S", str(ppid), *["0"] * 9, str(utime), str(stime), str(cutime), "0", *["0"] * 30]
    (d / "stat").write_text(f"{pid} (java x) " + " ".join(rest) + "\n")
    (d / "cmdline").write_bytes(cmd)


def test_daemons_and_their_descendants_counted_by_service_others_not(tmp_path: Path) -> None:
    nm = b"java\x00org.apache.hadoop.yarn.server.nodemanager.NodeManager\x00"
    proc_entry(tmp_path, 10, 1, nm, utime=2 * TICK, cutime=TICK)  # reaped containers: in cutime
    proc_entry(tmp_path, 11, 10, b"bash\x00container\x00", utime=TICK)  # a live container
    proc_entry(tmp_path, 12, 11, b"python\x00mr_link_round.py\x00", utime=3 * TICK)  # its streaming task
    proc_entry(tmp_path, 20, 1, b"java\x00org.apache.hadoop.hdfs.server.datanode.DataNode\x00", utime=TICK)
    proc_entry(tmp_path, 30, 1, b"python\x00crawlfleet\x00", utime=50 * TICK)  # not the cluster's
    (tmp_path / "self").mkdir()
    before = clustercpu.sample(tmp_path)
    assert before.processes == 2
    assert before.seconds == {"hdfs": 1.0, "yarn": 7.0, "spark": 0.0}
    proc_entry(tmp_path, 12, 11, b"python\x00mr_link_round.py\x00", utime=5 * TICK)
    used = clustercpu.sample(tmp_path).minus(before)
    assert used.total_s == 2.0 and used.to_json(pages=1000)["cpu_ms_per_page"] == 2.0


def test_no_cluster_on_this_box_is_zero(tmp_path: Path) -> None:
    assert clustercpu.sample(tmp_path / "none").total_s == 0.0
