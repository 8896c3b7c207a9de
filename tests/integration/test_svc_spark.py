"""Spark standalone (scripts/svc-spark.sh: a master and a worker from the pyspark wheel) running mrjob's
spark runner: the application is seen in the master's JSON, its output equals the inline runner's; and a
driver in a network namespace (another "machine") gets executors that reach it at its own address.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs import cluster
from jobs.jobrun import run_job
from jobs.mr_host_stats import MRHostStats
from jobs.runnerconfig import RunnerConfig
from tests.services import need_namespaces

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NETNS = ROOT / "scripts" / "netns.sh"


def _master() -> dict[str, Any]:
    with urllib.request.urlopen(cluster.spark_master_web() + "/json/", timeout=10) as resp:
        return dict(json.load(resp))


def _by_host(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: r["host"])


@pytest.mark.timeout(600)
def test_an_mrjob_job_runs_on_the_standalone_master(
    spark_standalone: str, jobs_segment: Path, tmp_path: Path, unique: str
) -> None:
    assert _master()["aliveworkers"] >= 1
    name = f"crawlfleet-test-{unique}"
    cfg = RunnerConfig(runner="spark", spark_master=spark_standalone, work_dir=tmp_path / "work")
    args = cfg.args()
    assert args[args.index("--spark-master") + 1] == spark_standalone
    out = run_job(MRHostStats, [jobs_segment], ["-D", f"spark.app.name={name}"], cfg)
    want = run_job(MRHostStats, [jobs_segment], [], RunnerConfig(runner="inline", work_dir=tmp_path / "inline"))
    assert _by_host(out.records) == _by_host(want.records)
    ran = [a for a in _master()["completedapps"] if a["name"] == name]
    assert len(ran) == 1 and ran[0]["state"] == "FINISHED", _master()["completedapps"]


def test_local_masters_keep_the_driver_on_loopback(tmp_path: Path) -> None:
    args = RunnerConfig(runner="spark", spark_master="local[2]", work_dir=tmp_path).args()
    assert "spark.driver.host=127.0.0.1" in args and "spark.driver.bindAddress=127.0.0.1" in args
    assert "--spark-tmp-dir" not in args


# --- a driver on another machine ------------------------------------------------------------------------
@pytest.fixture
def namespace() -> Iterator[str]:
    """A namespace on a fresh bridge that routes the cluster's 127.0.40.0/24 to this machine."""
    need_namespaces()
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    x = next(x for x in random.sample(range(1, 255), 254) if f"10.233.{x}." not in used)
    tag = uuid.uuid4().hex[:5]
    ns, bridge = f"cf{tag}sp", f"cfb{tag}s"
    subprocess.run([str(NETNS), "up", ns, f"10.233.{x}.2/24", "--bridge", bridge, "--host", f"10.233.{x}.1/24",
                    "--route", "127.0.40.0/24"], check=True, capture_output=True, text=True, timeout=60)  # fmt: skip
    try:
        yield ns
    finally:
        subprocess.run([str(NETNS), "down", ns, "--bridge", bridge], check=False, timeout=60)
        subprocess.run(["ip", "link", "del", bridge], check=False, capture_output=True)


DRIVER = """
import json, sys
from pathlib import Path
from jobs.mr_host_stats import MRHostStats
from jobs.jobrun import run_job
from jobs.runnerconfig import RunnerConfig
segment, work, name, master = sys.argv[1:5]
cfg = RunnerConfig(runner="spark", spark_master=master, work_dir=Path(work))
args = cfg.args()
out = run_job(MRHostStats, [Path(segment)], ["-D", "spark.app.name=" + name], cfg)
print(json.dumps({"driver": [a for a in args if a.startswith("spark.driver.host=")][0], "records": out.records}))
"""


@pytest.mark.timeout(600)
def test_a_driver_in_a_namespace_runs_on_the_master(
    namespace: str, spark_standalone: str, jobs_segment: Path, tmp_path: Path, unique: str
) -> None:
    name = f"crawlfleet-ns-{unique}"
    proc = subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", DRIVER, str(jobs_segment),
                           str(tmp_path / "work"), name, spark_standalone],
                          capture_output=True, text=True, timeout=540, cwd=ROOT, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["driver"].startswith("spark.driver.host=10.233.")  # its own address, not loopback
    want = run_job(MRHostStats, [jobs_segment], [], RunnerConfig(runner="inline", work_dir=tmp_path / "inline"))
    assert _by_host(got["records"]) == _by_host(want.records)
    ran = [a for a in _master()["completedapps"] if a["name"] == name]
    assert len(ran) == 1 and ran[0]["state"] == "FINISHED"
