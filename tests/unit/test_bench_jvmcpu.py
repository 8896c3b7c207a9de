"""The store-JVM CPU reader of the benches (pipeline/harness/bench/jvmcpu.py) on a fake /proc tree."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.harness.bench import jvmcpu


def _task(root: Path, pid: int, tid: int, name: str, ticks: tuple[int, int]) -> None:
    task = root / str(pid) / "task" / str(tid)
    task.mkdir(parents=True)
    rest = ["S"] + ["0"] * 10 + [str(ticks[0]), str(ticks[1])] + ["0"] * 5
    (task / "stat").write_text(f"{tid} ({name}) {' '.join(rest)}\n")


def _proc(root: Path, pid: int, cmdline: bytes) -> None:
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "cmdline").write_bytes(cmdline)


def test_thread_kinds() -> None:
    assert jvmcpu.thread_kind("GC Thread#3") == "gc"
    assert jvmcpu.thread_kind("G1 Conc#0") == "gc"
    assert jvmcpu.thread_kind("C2 CompilerThre") == "jit"
    assert jvmcpu.thread_kind("RpcServer.defau") == "rpc"
    assert jvmcpu.thread_kind("MemStoreFlusher") == "other"


def test_only_hbase_jvms_count_and_threads_sum_by_kind(tmp_path: Path) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    _proc(tmp_path, 10, b"java\x00-cp\x00x\x00org.apache.hadoop.hbase.master.HMaster\x00start")
    _task(tmp_path, 10, 11, "GC Thread#0", (tick, tick))  # 2 s
    _task(tmp_path, 10, 12, "RpcServer.defau", (3 * tick, 0))  # 3 s (a name with a space too)
    _proc(tmp_path, 20, b"python\x00-m\x00pipeline.cli\x00crawl")
    _task(tmp_path, 20, 21, "python", (100 * tick, 0))  # not the store's
    (tmp_path / "self").mkdir()
    before = jvmcpu.sample(tmp_path)
    assert before.processes == 1
    assert before.seconds["gc"] == 2.0 and before.seconds["rpc"] == 3.0 and before.seconds["other"] == 0.0
    _task(tmp_path, 10, 13, "MemStoreFlusher", (tick, 0))  # a thread born in between counts whole
    d = jvmcpu.delta(before, jvmcpu.sample(tmp_path))
    assert d.seconds == {"gc": 0.0, "jit": 0.0, "rpc": 0.0, "other": 1.0}
    assert d.to_json(1000) == {"processes": 1, "cpu_s": 1.0, "cpu_ms_per_page": 1.0,
                               "by_kind_s": {"gc": 0.0, "jit": 0.0, "rpc": 0.0, "other": 1.0}}  # fmt: skip


def test_no_local_store_is_zero_not_an_error(tmp_path: Path) -> None:
    assert jvmcpu.sample(tmp_path / "absent").processes == 0
