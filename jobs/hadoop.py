"""Where scripts/svc-hadoop.sh put Hadoop, and the mrjob arguments that run a job on it: on YARN (the
pseudo-distributed daemons, or any cluster ``jobs.cluster`` names) or in Hadoop's local mode.

mrjob's hadoop runner needs a ``hadoop`` command and the streaming jar. On YARN its temp space (the job's
uploaded inputs and files, its output) is on HDFS and the submission says where the cluster is
(``fs.defaultFS``, ``mapreduce.framework.name=yarn``, the ResourceManager); in local mode the paths are
``file://`` (otherwise mrjob turns them into hdfs:// ones) and ``bin/hadoop-local`` reads the local-mode
configuration. Which one: the ``cluster.hadoop_mode`` setting (``auto`` = YARN when it answers).
"""

from __future__ import annotations

import os
from pathlib import Path

from jobs import cluster
from pipeline.settings import ClusterSettings

DEFAULT_HOME = Path.home() / ".cache" / "crawlfleet" / "hadoop-cluster"
MODES = ("yarn", "local")
ONE_SPLIT_BYTES = 1 << 40  # a split size no input file of a link job reaches


def hadoop_home() -> Path:
    """The install directory (``CRAWLFLEET_HADOOP_HOME`` overrides the default cache path)."""
    return Path(os.environ.get("CRAWLFLEET_HADOOP_HOME", str(DEFAULT_HOME)))


def streaming_jar(home: Path | None = None) -> Path | None:
    jars = sorted((home or hadoop_home()).glob("lib/hadoop-streaming-*.jar"))
    return jars[-1] if jars else None


def installed(home: Path | None = None) -> bool:
    home = home or hadoop_home()
    return (home / "bin" / "hadoop").is_file() and streaming_jar(home) is not None


def yarn_answers(cs: ClusterSettings | None = None) -> bool:
    """HDFS (WebHDFS on the NameNode) and the ResourceManager's REST API both answer."""
    host, port = cluster.webhdfs_address(cs)
    return cluster.answers(f"http://{host}:{port}/webhdfs/v1/?op=GETFILESTATUS") and cluster.answers(
        cluster.yarn_rm_web(cs) + "/ws/v1/cluster/info"
    )


def mode(cs: ClusterSettings | None = None) -> str:
    """``yarn`` or ``local``, from ``cluster.hadoop_mode`` (``auto``: yarn when the daemons answer)."""
    cs = cluster.settings(cs)
    if cs.hadoop_mode in MODES:
        return cs.hadoop_mode
    return "yarn" if yarn_answers(cs) else "local"


def runner_args(
    tmp_dir: Path, *, home: Path | None = None, mode_: str | None = None, cs: ClusterSettings | None = None
) -> list[str]:
    """mrjob switches for ``-r hadoop``: on YARN (temp space on HDFS) or in local mode (temp space under
    ``tmp_dir``). ``mode_`` None = ``mode(cs)``.

    Raises FileNotFoundError when Hadoop is not installed (run ``scripts/svc-hadoop.sh install``)."""
    home = home or hadoop_home()
    jar = streaming_jar(home)
    if jar is None or not (home / "bin" / "hadoop").is_file():
        raise FileNotFoundError(f"no Hadoop in {home}: run scripts/svc-hadoop.sh install")
    how = mode_ or mode(cs)
    if how not in MODES:
        raise ValueError(f"hadoop mode must be one of {MODES}, got {how!r}")
    # No job-history logs for mrjob to dig through on failure (none in local mode; on YARN the task logs
    # stay on the NodeManager): skip its search.
    common = ["--hadoop-streaming-jar", str(jar), "--hadoop-log-dirs", str((home / "logs").resolve()),
              # One map task per input file, as on the local runner (jobs/localrunner.py): the link jobs'
              # inputs are manifests and candidate files written one per intended task. Hadoop would
              # otherwise cut a one-line manifest in two (mapreduce.job.maps = 2), a task for the empty half.
              "-D", f"mapreduce.input.fileinputformat.split.minsize={ONE_SPLIT_BYTES}",
              # The tasks' Python has mrjob (a dependency of crawlfleet, installed where the tasks run): no
              # zip of mrjob uploaded per job, no setup wrapper (a shell) per task.
              "--no-bootstrap-mrjob"]  # fmt: skip
    if how == "local":
        tmp_dir.mkdir(parents=True, exist_ok=True)
        return ["--hadoop-bin", str(home / "bin" / "hadoop-local"), *common,
                "--hadoop-tmp-dir", tmp_dir.resolve().as_uri()]  # fmt: skip
    namenode = cluster.namenode_uri(cs)
    return [
        "--hadoop-bin", str(home / "bin" / "hadoop"), *common,
        "--hadoop-tmp-dir", f"{namenode}/tmp/crawlfleet-mrjob",
        "-D", f"fs.defaultFS={namenode}",
        "-D", "mapreduce.framework.name=yarn",
        "-D", f"yarn.resourcemanager.address={cluster.yarn_rm(cs)}",
        # A small job (a link round of a few segments) runs its tasks inside its ApplicationMaster's container
        # instead of starting one per task; YARN falls back to containers past uber mode's size limits.
        "-D", "mapreduce.job.ubertask.enable=true",
    ]  # fmt: skip
