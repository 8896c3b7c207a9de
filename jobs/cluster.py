"""The cluster's addresses, in one place: HDFS (RPC and WebHDFS), YARN, Spark's master, the S3 endpoint.

Everything comes from the ``[cluster]`` settings section (``CRAWLFLEET_CLUSTER_*``; defaults: the dev
stack's services on ``cluster.addr``, see scripts/lib-cluster.sh) and, for S3's credentials, the standard
``AWS_*`` variables, else the client file ``scripts/svc-s3.sh`` writes, else its dev pair. Callers pass
the results to fsspec (``fsspec.filesystem("webhdfs", **webhdfs_options())``,
``s3fs.S3FileSystem(**s3_options())``), mrjob or spark-submit. Only ``driver_host`` and ``answers`` touch
the network.
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

from pipeline.settings import ClusterSettings
from pipeline.settings.cluster import (
    SPARK_MASTER_PORT,
    SPARK_MASTER_WEB_PORT,
    YARN_RM_PORT,
    YARN_RM_WEB_PORT,
)

# The storage clients' part lives with storage (``pipeline.storage.clusterfs``); named here too for callers.
from pipeline.storage.clusterfs import (  # noqa: E402,F401 - re-exported
    DEV_S3_KEY,
    DEV_S3_SECRET,
    _host_port,
    namenode_uri,
    s3_client_file,
    s3_endpoint,
    s3_options,
    settings,
    webhdfs_address,
    webhdfs_options,
)


def yarn_rm(cs: ClusterSettings | None = None) -> str:
    """``HOST:PORT`` of the ResourceManager (yarn.resourcemanager.address)."""
    cs = settings(cs)
    return cs.yarn_rm or f"{cs.addr}:{YARN_RM_PORT}"


def yarn_rm_web(cs: ClusterSettings | None = None) -> str:
    """``http://HOST:PORT`` of the ResourceManager's web/REST API (``/ws/v1/cluster/apps``)."""
    return f"http://{_host_port(yarn_rm(cs), YARN_RM_PORT)[0]}:{YARN_RM_WEB_PORT}"


def spark_master(cs: ClusterSettings | None = None) -> str:
    """``spark://HOST:PORT`` of the standalone master."""
    cs = settings(cs)
    return cs.spark_master or f"spark://{cs.addr}:{SPARK_MASTER_PORT}"


def spark_tmp_dir(cs: ClusterSettings | None = None) -> str:
    """Where a job on a cluster Spark master keeps its files: storage every executor reads
    (``cluster.spark_tmp_dir``; default the cluster's HDFS, ``NAMENODE/tmp/crawlfleet-spark``)."""
    cs = settings(cs)
    return cs.spark_tmp_dir or f"{namenode_uri(cs)}/tmp/crawlfleet-spark"


def spark_master_web(cs: ClusterSettings | None = None) -> str:
    """``http://HOST:PORT`` of the master's web UI, whose ``/json/`` lists workers and applications."""
    return f"http://{_host_port(spark_master(cs), SPARK_MASTER_PORT)[0]}:{SPARK_MASTER_WEB_PORT}"


def driver_host(master: str) -> str:
    """The local address executors can reach a Spark driver at: the source address of this machine's route
    to ``master`` (no packet is sent). ``local[N]`` masters keep the driver on 127.0.0.1."""
    if not master.startswith("spark://"):
        return "127.0.0.1"
    host, port = _host_port(master, SPARK_MASTER_PORT)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, port))
            return str(s.getsockname()[0])
    except OSError as exc:  # an unknown name, no route: a user's mistake, said in one line
        raise ValueError(f"spark master {master}: no route to {host!r} ({exc.strerror or exc})") from None


def answers(url: str, *, timeout_s: float = 3.0) -> bool:
    """An HTTP server answers ``url`` at all (any status): a cheap is-it-up check."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):  # noqa: S310 - a configured http(s) URL
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False
