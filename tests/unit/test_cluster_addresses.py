"""jobs/cluster.py: the cluster's addresses from the [cluster] settings, S3 options from the AWS variables,
svc-s3.sh's client file or the dev pair; jobs/hadoop.py's runner arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs import cluster
from pipeline.settings import ClusterSettings, SettingsError, load_settings


def test_defaults_are_the_dev_stack_on_its_cluster_address() -> None:
    cs = ClusterSettings()
    assert cluster.namenode_uri(cs) == "hdfs://127.0.40.1:8020"
    assert cluster.webhdfs_address(cs) == ("127.0.40.1", 9870)
    assert cluster.yarn_rm(cs) == "127.0.40.1:8032" and cluster.yarn_rm_web(cs) == "http://127.0.40.1:8088"
    assert cluster.spark_master(cs) == "spark://127.0.40.1:7077"
    assert cluster.spark_master_web(cs) == "http://127.0.40.1:7080"
    assert cluster.s3_endpoint(cs, {}) == "http://127.0.40.1:9000"


def test_one_address_moves_them_all_and_each_can_point_elsewhere() -> None:
    cs = load_settings(environ={"CRAWLFLEET_CLUSTER_ADDR": "10.0.0.5",
                                "CRAWLFLEET_CLUSTER_HDFS_URI": "hdfs://nn.example:9000/",
                                "CRAWLFLEET_CLUSTER_WEBHDFS": "nn.example:50070",
                                "CRAWLFLEET_CLUSTER_SPARK_MASTER": "spark://m.example:7077"}).cluster  # fmt: skip
    assert cluster.namenode_uri(cs) == "hdfs://nn.example:9000"
    assert cluster.webhdfs_address(cs) == ("nn.example", 50070)
    assert cluster.yarn_rm(cs) == "10.0.0.5:8032"
    assert cluster.spark_master_web(cs) == "http://m.example:7080"
    assert cluster.s3_endpoint(cs, {"AWS_ENDPOINT_URL": "http://s3.example:9000"}) == "http://s3.example:9000"


def test_hadoop_mode_is_checked() -> None:
    with pytest.raises(SettingsError, match="cluster.hadoop_mode"):
        load_settings(environ={"CRAWLFLEET_CLUSTER_HADOOP_MODE": "mesos"})


def test_s3_credentials_env_then_client_file_then_dev_pair(tmp_path: Path) -> None:
    env = {"CRAWLFLEET_S3_DATA": str(tmp_path)}
    opts = cluster.s3_options(ClusterSettings(), env)
    assert (opts["key"], opts["secret"]) == (cluster.DEV_S3_KEY, cluster.DEV_S3_SECRET)
    (tmp_path / "client.env").write_text("AWS_ACCESS_KEY_ID=filekey\nAWS_SECRET_ACCESS_KEY=filesecret\n")
    opts = cluster.s3_options(ClusterSettings(), env)
    assert (opts["key"], opts["secret"]) == ("filekey", "filesecret")
    opts = cluster.s3_options(ClusterSettings(), {**env, "AWS_ACCESS_KEY_ID": "envkey"})
    assert (opts["key"], opts["secret"]) == ("envkey", "filesecret")


def test_local_spark_masters_keep_the_driver_on_loopback() -> None:
    assert cluster.driver_host("local[2]") == "127.0.0.1"
    with pytest.raises(ValueError, match="no route"):
        cluster.driver_host("spark://no-such-host.invalid:7077")


def test_hadoop_runner_args_for_yarn_and_for_local_mode(tmp_path: Path) -> None:
    from jobs import hadoop

    home = tmp_path / "hadoop"
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    (home / "bin" / "hadoop").write_text("#!/bin/sh\n")
    (home / "lib" / "hadoop-streaming-3.4.2.jar").write_bytes(b"")
    cs = ClusterSettings(addr="10.0.0.5")
    yarn = hadoop.runner_args(tmp_path / "tmp", home=home, mode_="yarn", cs=cs)
    assert yarn[yarn.index("--hadoop-bin") + 1] == str(home / "bin" / "hadoop")
    assert yarn[yarn.index("--hadoop-tmp-dir") + 1] == "hdfs://10.0.0.5:8020/tmp/crawlfleet-mrjob"
    assert {"fs.defaultFS=hdfs://10.0.0.5:8020", "mapreduce.framework.name=yarn",
            "yarn.resourcemanager.address=10.0.0.5:8032"} <= set(yarn)  # fmt: skip
    local = hadoop.runner_args(tmp_path / "tmp", home=home, mode_="local", cs=cs)
    assert local[local.index("--hadoop-bin") + 1] == str(home / "bin" / "hadoop-local")
    assert local[local.index("--hadoop-tmp-dir") + 1] == (tmp_path / "tmp").resolve().as_uri()
    assert not any("yarn" in a for a in local)
    for args in (yarn, local):  # one map task per input file; the tasks' Python imports mrjob itself
        assert f"mapreduce.input.fileinputformat.split.minsize={hadoop.ONE_SPLIT_BYTES}" in args
        assert "--no-bootstrap-mrjob" in args
    assert hadoop.mode(ClusterSettings(hadoop_mode="local")) == "local"
    with pytest.raises(FileNotFoundError):
        hadoop.runner_args(tmp_path / "tmp", home=tmp_path / "none", mode_="yarn", cs=cs)
