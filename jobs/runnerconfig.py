"""How a link job runs: the mrjob runner and its switches (``RunnerConfig``), and Spark's settings.

``jobs.runner`` runs the jobs with these; ``crawlfleet links`` and ``crawlfleet jobs`` build them from the
crawl's settings.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from jobs import cluster, hadoop

RUNNERS = ("inline", "local", "spark", "hadoop", "emr")
# Runners whose tasks run on a cluster: a link round is one job there (``LinkPipeline.run_round``), its
# extract output chained to its merge on the cluster, not through this process.
CLUSTER_RUNNERS = ("spark", "hadoop", "emr")

# The driver JVM of a link job lives for one round and carries little data (manifests in, combined records
# through the shuffle), so its CPU is start-up: class loading and the JIT. The C1 compiler alone and the serial
# collector (no parallel GC threads) cut that JVM's CPU from 10.7 to 7.4 s on a 1,000-page round (#18 point 2,
# docs/bench/jobs.md); spark-submit's launcher applies these to the driver in client mode (local[N]).
SPARK_DRIVER_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@dataclass(frozen=True, slots=True)
class RunnerConfig:
    """How to run a job. ``work_dir`` holds temp space (one sub-directory per job run)."""

    runner: str = "inline"
    work_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "crawlfleet-jobs")
    spark_master: str = "local[2]"
    python_bin: str = sys.executable
    conf_path: str | None = None  # an mrjob.conf (EMR); None means --no-conf
    extra_args: tuple[str, ...] = ()
    # Map tasks of the extract job (one manifest file each, segments spread over them by size). Each task
    # costs a Python start (a JVM-launched worker on Hadoop), so about one per core, not one per segment.
    map_tasks: int = 2
    # On the local runner a task is a process forked from a warm interpreter (jobs/taskfork.py) and a step
    # runs ``--num-cores`` mappers and as many reducers (jobs/localrunner.py): a round over less than this
    # many segment bytes runs one task per step (``tasks_for``), larger rounds up to ``map_tasks``.
    split_bytes: int = 32 << 20
    # Where a cluster Spark master's jobs keep their files ("" = cluster.spark_tmp_dir).
    spark_tmp_dir: str = ""
    # Link rounds on Spark: "long" = one application for the life of `crawlfleet links` (jobs/sparkapp.py),
    # "per-round" = mrjob's spark runner, a spark-submit per round (cluster.spark_app).
    spark_app: str = "long"

    def args(self) -> list[str]:
        """mrjob switches for this runner (everything but the job's own arguments and inputs)."""
        if self.runner not in RUNNERS:
            raise ValueError(f"runner must be one of {RUNNERS}, got {self.runner!r}")
        out = ["-r", self.runner]
        out += ["--conf-path", self.conf_path] if self.conf_path else ["--no-conf"]
        # Temp space (and Spark's output, which mrjob leaves behind) under work_dir, not /tmp.
        out += ["--local-tmp-dir", str(self.work_dir)]
        if self.runner in ("local", "hadoop", "spark"):
            out += ["--python-bin", self.python_bin]
        if self.runner == "local":
            # Tasks run on this box with this interpreter, which imports mrjob: no zip of mrjob per job and
            # no setup wrapper (a shell and a Python start more per task, and no fork: jobs/taskfork.py).
            out += ["--num-cores", str(max(1, self.map_tasks)), "--no-bootstrap-mrjob"]
            # numpy (the seen filter's arrays; no linear algebra) would start a BLAS thread per core in
            # every task: about 0.1 CPU-s per task start on two cores.
            out += ["--cmdenv", "OPENBLAS_NUM_THREADS=1"]
        if self.runner == "spark":
            out += ["--spark-master", self.spark_master, "--spark-submit-bin", spark_submit_bin()]
            for conf in spark_conf(self):
                out += ["-D", conf]
            if not self.spark_master.startswith("local"):
                # A cluster master's executors run on other machines: the job's files and its output go
                # where every one of them reads them, the cluster's HDFS (cluster.spark_tmp_dir; s3a:// on
                # EMR), uploaded and read back with the hadoop launcher.
                out += ["--spark-tmp-dir", self.spark_tmp_dir or cluster.spark_tmp_dir()]
                out += ["--hadoop-bin", str(hadoop.hadoop_home() / "bin" / "hadoop")]
        if self.runner == "hadoop":
            out += hadoop.runner_args(self.work_dir / "hadoop-tmp")
        return out + list(self.extra_args)


def spark_conf(cfg: RunnerConfig) -> list[str]:
    """Spark settings (``name=value``) of a job of ``cfg``'s: no web UI, and the driver listening where its
    executors reach it: on loopback for local[N] (the machine is shared and must send nothing off-host); for
    a cluster master (spark://), on this machine's address on the route to the master
    (``jobs.cluster.driver_host``), with HDFS's DataNodes reached at the names they advertise."""
    driver = cluster.driver_host(cfg.spark_master)
    out = ["spark.ui.enabled=false", f"spark.driver.host={driver}", f"spark.driver.bindAddress={driver}",
           "spark.sql.shuffle.partitions=4", f"spark.driver.extraJavaOptions={SPARK_DRIVER_JVM_OPTS}"]  # fmt: skip
    if not cfg.spark_master.startswith("local"):
        out.append("spark.hadoop.dfs.client.use.datanode.hostname=true")
    return out


def spark_submit_bin() -> str:
    """spark-submit from the pyspark package next to this interpreter (PyPI pyspark ships it)."""
    local = Path(sys.executable).with_name("spark-submit")
    if local.exists():
        return str(local)
    found = shutil.which("spark-submit")
    if found:
        return found
    raise FileNotFoundError("spark-submit not found: pip install 'crawlfleet[spark]'")
