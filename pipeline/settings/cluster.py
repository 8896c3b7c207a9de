"""Where the cluster services are: HDFS, YARN, Spark's standalone master, the S3-compatible server.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``; the link jobs'
``jobs.cluster`` turns it into addresses and client options.

``addr`` is the one address the dev stack's cluster services listen on and advertise
(``scripts/lib-cluster.sh``: a loopback address that is not 127.0.0.1, so a network namespace can route
it to this machine). Each other field, when empty, is that address with the service's default port;
set it to point at a real cluster instead (``CRAWLFLEET_CLUSTER_HDFS_URI=hdfs://namenode:8020`` ...).
S3 credentials are not settings: the standard ``AWS_*`` variables carry them (``jobs.cluster``)."""

from __future__ import annotations

from dataclasses import dataclass

# The dev stack's ports (scripts/svc-hadoop.sh, svc-spark.sh, svc-s3.sh use the same defaults).
HDFS_RPC_PORT = 8020
WEBHDFS_PORT = 9870
YARN_RM_PORT = 8032
YARN_RM_WEB_PORT = 8088
SPARK_MASTER_PORT = 7077
SPARK_MASTER_WEB_PORT = 7080
S3_PORT = 9000


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    addr: str = "127.0.40.1"
    hdfs_uri: str = ""  # hdfs://HOST:PORT of the NameNode's RPC; empty = hdfs://ADDR:8020
    webhdfs: str = ""  # HOST:PORT of the NameNode's HTTP (WebHDFS); empty = ADDR:9870
    yarn_rm: str = ""  # HOST:PORT of the ResourceManager; empty = ADDR:8032 (its web/REST API on 8088)
    spark_master: str = ""  # spark://HOST:PORT; empty = spark://ADDR:7077 (its web/JSON on 7080)
    s3_endpoint: str = ""  # http(s)://HOST:PORT; empty = AWS_ENDPOINT_URL, else http://ADDR:9000
    # mrjob's hadoop runner: "yarn" submits to the ResourceManager with input and temp space on HDFS,
    # "local" runs Hadoop's local mode (no daemons, file:// paths), "auto" = yarn when HDFS and YARN answer.
    hadoop_mode: str = "auto"
    # Where a job on a cluster Spark master keeps its files (uploads, output): storage every executor reads;
    # empty = the cluster's HDFS, HDFS_URI/tmp/crawlfleet-spark (s3a://BUCKET/PATH on EMR).
    spark_tmp_dir: str = ""
    # Link rounds on Spark: "long" = one application kept for the life of `crawlfleet links` (a round costs
    # task scheduling), "per-round" = mrjob's spark runner, one spark-submit per round.
    spark_app: str = "long"
