"""``crawlfleet dispatcher --shards N --shard I`` as a real process against real HBase: a second process for a
shard that runs refuses to start with one line and exit 2, before it touches the broker; shards without the
HBase store, or a shard out of range, are one line too."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pipeline.storage.hbase import HBaseStore
from pipeline.storage.shardleases import ShardLease

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pipeline.cli", "dispatcher", "http://a.test/", "--no-progress", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_a_second_owner_of_a_shard_is_refused_in_one_line(
    tmp_path: Path, hbase_thrift: tuple[str, int], hbase_prefix: str
) -> None:
    host, port = hbase_thrift
    prefix = f"{hbase_prefix}cli"
    service = f"svc{uuid.uuid4().hex[:6]}"
    env = dict(os.environ, CRAWLFLEET_STORE_KIND="hbase", CRAWLFLEET_STORE_HBASE_PREFIX=prefix,
               CRAWLFLEET_HBASE_HOST=host, CRAWLFLEET_HBASE_PORT=str(port), CRAWLFLEET_DISPATCH_SERVICE=service,
               CRAWLFLEET_BROKER_URL="amqp://guest@127.0.0.1:1//")  # fmt: skip  (never reached)
    store = HBaseStore(host, port, prefix=prefix)
    holder = ShardLease(store, lambda: HBaseStore(host, port, prefix=prefix), service, 1, heartbeat_s=30,
                        owner="first-process")  # fmt: skip
    holder.join()
    try:
        proc = run(["--out", str(tmp_path / "out"), "--shards", "3", "--shard", "1"], env, tmp_path)
    finally:
        holder.leave(done=True)
        store.close()
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "shard 1" in lines[0] and "already running" in lines[0] and "first-process" in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("args", "named"), [
    (["--shards", "3", "--shard", "3"], "dispatch.shard"),
    (["--shards", "2", "--shard", "0"], "dispatch.shards"),  # the SQLite store: shards need HBase
])  # fmt: skip
def test_a_bad_shard_setting_is_one_line(tmp_path: Path, args: list[str], named: str) -> None:
    env = dict(os.environ, CRAWLFLEET_STORE_KIND="sqlite", CRAWLFLEET_BROKER_URL="amqp://guest@127.0.0.1:1//")
    proc = run(["--out", str(tmp_path / "out"), *args], env, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and named in proc.stderr, proc.stderr
