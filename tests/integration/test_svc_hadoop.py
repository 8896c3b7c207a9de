"""HDFS and YARN, pseudo-distributed (scripts/svc-hadoop.sh: four daemons from Maven Central's jars).

- fsspec's ``webhdfs`` (pure HTTP, the NameNode redirecting each read and write to the DataNode): a write
  to a temporary name, a rename, a read back and a listing;
- mrjob's hadoop runner submitting to YARN: input and output on hdfs://, the application seen FINISHED
  in the ResourceManager's REST API, its output equal to the inline runner's;
- from another "machine", a network namespace made here (scripts/netns.sh, routing 127.0.40.0/24 through
  its veth to this one): a WebHDFS write and read, redirect included.
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

import fsspec
import pytest

from jobs import cluster, hadoop
from jobs.jobrun import run_job
from jobs.mr_host_stats import MRHostStats
from jobs.runnerconfig import RunnerConfig
from tests.services import need_namespaces

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NETNS = ROOT / "scripts" / "netns.sh"


@pytest.fixture
def hdfs_dir(hdfs_yarn: str, unique: str) -> Iterator[str]:
    """A directory of this test on HDFS, removed afterwards."""
    fs = fsspec.filesystem("webhdfs", **cluster.webhdfs_options())
    path = f"/tmp/crawlfleet-tests/{unique}"
    fs.makedirs(path, exist_ok=True)
    yield path
    fs.rm(path, recursive=True)


def test_webhdfs_write_rename_read_list(hdfs_dir: str) -> None:
    fs = fsspec.filesystem("webhdfs", **cluster.webhdfs_options(), skip_instance_cache=True)
    body = b"".join(json.dumps({"url": f"http://h/{i}", "n": i}).encode() + b"\n" for i in range(5000))
    tmp, final = f"{hdfs_dir}/.segment-00000.jsonl.tmp", f"{hdfs_dir}/segment-00000.jsonl"
    with fs.open(tmp, "wb") as fh:
        fh.write(body)
    assert fs.ls(hdfs_dir, detail=False) == [tmp]
    fs.mv(tmp, final)  # WebHDFS RENAME: one NameNode operation, atomic
    assert fs.ls(hdfs_dir, detail=False) == [final]
    assert fs.info(final)["size"] == len(body)
    assert fs.cat(final) == body
    with fs.open(final, "rb") as fh:
        fh.seek(len(body) - 10)
        assert fh.read() == body[-10:]


def test_yarn_lists_a_running_node(hdfs_yarn: str) -> None:
    proc = subprocess.run([str(hadoop.hadoop_home() / "bin" / "yarn"), "node", "-list"], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "RUNNING" in proc.stdout and "Total Nodes:1" in proc.stdout, proc.stdout


def _apps(state: str) -> list[dict[str, object]]:
    url = f"{cluster.yarn_rm_web()}/ws/v1/cluster/apps?states={state}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return list((json.load(resp).get("apps") or {}).get("app") or [])


@pytest.mark.timeout(600)
def test_an_mrjob_job_runs_on_yarn_with_hdfs_paths(
    hdfs_dir: str, jobs_segment: Path, tmp_path: Path, unique: str
) -> None:
    fs = fsspec.filesystem("webhdfs", **cluster.webhdfs_options())
    fs.put_file(str(jobs_segment), f"{hdfs_dir}/in/segment-00000.jsonl")
    namenode = cluster.namenode_uri()
    name = f"crawlfleet-test-{unique}"
    cfg = RunnerConfig(runner="hadoop", work_dir=tmp_path / "work")
    args = cfg.args()
    assert "mapreduce.framework.name=yarn" in args and f"fs.defaultFS={namenode}" in args
    out = run_job(MRHostStats, [f"{namenode}{hdfs_dir}/in/segment-00000.jsonl"],
                  ["-D", f"mapreduce.job.name={name}", "--output-dir", f"{namenode}{hdfs_dir}/out"], cfg)  # fmt: skip
    want = run_job(MRHostStats, [jobs_segment], [], RunnerConfig(runner="inline", work_dir=tmp_path / "inline"))
    assert sorted(out.records, key=lambda r: r["host"]) == sorted(want.records, key=lambda r: r["host"])
    # It went through YARN: the ResourceManager ran the application to success.
    ran = [a for a in _apps("FINISHED") if a["name"] == name]
    assert len(ran) == 1, [a["name"] for a in _apps("FINISHED,FAILED,KILLED")]
    assert ran[0]["finalStatus"] == "SUCCEEDED" and ran[0]["applicationType"] == "MAPREDUCE"
    # Its output is on HDFS.
    assert any(p.rsplit("/", 1)[-1].startswith("part-") for p in fs.ls(f"{hdfs_dir}/out", detail=False))


def test_local_mode_stays_available(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAWLFLEET_CLUSTER_HADOOP_MODE", "local")
    args = RunnerConfig(runner="hadoop", work_dir=tmp_path).args()
    assert args[args.index("--hadoop-bin") + 1].endswith("/bin/hadoop-local")
    assert args[args.index("--hadoop-tmp-dir") + 1].startswith("file://")
    assert "mapreduce.framework.name=yarn" not in args


# --- from another machine: a network namespace ----------------------------------------------------------
@pytest.fixture
def namespace() -> Iterator[str]:
    """A namespace on a fresh bridge that routes the cluster's 127.0.40.0/24 to this machine."""
    need_namespaces()
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    x = next(x for x in random.sample(range(1, 255), 254) if f"10.232.{x}." not in used)
    tag = uuid.uuid4().hex[:5]
    ns, bridge = f"cf{tag}hd", f"cfb{tag}h"
    subprocess.run([str(NETNS), "up", ns, f"10.232.{x}.2/24", "--bridge", bridge, "--host", f"10.232.{x}.1/24",
                    "--route", "127.0.40.0/24"], check=True, capture_output=True, text=True, timeout=60)  # fmt: skip
    try:
        yield ns
    finally:
        subprocess.run([str(NETNS), "down", ns, "--bridge", bridge], check=False, timeout=60)
        subprocess.run(["ip", "link", "del", bridge], check=False, capture_output=True)


CLIENT = """
import json, socket, sys
import fsspec
from jobs import cluster
path = sys.argv[1]
fs = fsspec.filesystem("webhdfs", **cluster.webhdfs_options())
with fs.open(path + ".tmp", "wb") as fh:
    fh.write(b"from the namespace\\n" * 1000)
fs.mv(path + ".tmp", path)
host, port = cluster.webhdfs_address()
with socket.create_connection((host, port)) as s:
    me = s.getsockname()[0]
print(json.dumps({"me": me, "read": fs.cat(path).decode()[:19], "size": fs.info(path)["size"]}))
"""


def test_a_client_in_a_namespace_writes_and_reads_through_webhdfs(namespace: str, hdfs_dir: str) -> None:
    path = f"{hdfs_dir}/from-ns.txt"
    proc = subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", CLIENT, path],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["me"].startswith("10.232.")  # it came over the veth, from the namespace's own address
    assert got["read"] == "from the namespace\n" and got["size"] == 19_000
    # And this machine sees what it wrote.
    fs = fsspec.filesystem("webhdfs", **cluster.webhdfs_options())
    assert fs.cat(path) == b"from the namespace\n" * 1000
