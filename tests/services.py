"""What a test needs from the machine, in one place: skipped on a developer's box, failed in CI.

With ``CI=true`` (or 1/yes) in the environment, a test that needs unbound, Java, Spark, Hadoop (or the
cluster services), HBase or network namespaces and cannot get them fails with one line naming what is
missing; elsewhere it is skipped with the same line. Every test and fixture that needs one of them calls the ``need_*`` below.
"""

from __future__ import annotations

import os
import shutil

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def need(ok: bool, missing: str, how: str = "") -> None:
    """Go on if ``ok``; else fail (CI) or skip (elsewhere) with one line naming ``missing``."""
    if ok:
        return
    line = f"{missing} is missing" + (f": {how}" if how else "")
    if in_ci():
        pytest.fail(f"CI=true and {line}", pytrace=False)
    pytest.skip(line)


def need_unbound() -> None:
    from pipeline.dns.unbound import unbound_binary

    need(unbound_binary() is not None, "unbound", "run scripts/svc-unbound.sh install")


def need_java() -> None:
    need(shutil.which("java") is not None, "java", "run scripts/svc-hbase.sh install")


def need_spark() -> str:
    """The spark-submit to use (pyspark from the ``[spark]`` extra, and java)."""
    from jobs.runnerconfig import spark_submit_bin

    need_java()
    try:
        return spark_submit_bin()
    except FileNotFoundError as exc:
        need(False, "spark-submit", str(exc))
        raise  # not reached: need() fails or skips


def need_namespaces() -> None:
    need(os.geteuid() == 0 and shutil.which("ip") is not None, "network namespaces", "they need root and iproute2")


def need_hbase() -> None:
    """HBase may be left out on purpose (``CRAWLFLEET_SKIP_HBASE=1``); in CI that is a failure too."""
    need(os.environ.get("CRAWLFLEET_SKIP_HBASE") != "1", "HBase", "CRAWLFLEET_SKIP_HBASE=1 leaves it out")


def need_cluster() -> None:
    """The cluster services (S3 server, HDFS + YARN, Spark standalone) may be left out on purpose
    (``CRAWLFLEET_SKIP_CLUSTER=1``); in CI that is a failure too."""
    need(os.environ.get("CRAWLFLEET_SKIP_CLUSTER") != "1", "the cluster services (Hadoop, Spark, S3)",
         "CRAWLFLEET_SKIP_CLUSTER=1 leaves them out")  # fmt: skip


def need_hadoop(installed: bool, why: str) -> None:
    need(installed, "Hadoop", why)
