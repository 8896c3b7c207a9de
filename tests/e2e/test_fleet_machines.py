"""The fleet across machines that share nothing but the network: three fetch nodes, the dispatcher and two
``crawlfleet links`` processes, each a machine of its own (``tests/fixtures/machines.py``: a network
namespace and a mount namespace: it sees its own files and the installed software, no other machine's
files and none of the services' data), every service reached over the network only.

- Run A: segments on HDFS (``hdfs://``, written through WebHDFS), the link jobs on YARN (``--runner hadoop``).
- Run B: segments on the S3 server (``s3://``), the link jobs on Spark's standalone master
  (``--runner spark``; the driver in the links machine, its executors on the worker reaching it back).

RabbitMQ (a private broker with TLS and a user per role), HBase Thrift and the testbed's DNS are reached
through forwarders on the bridge; the testbed's and the cluster's addresses are routed to this box.
Judged from the testbed's access log (every reachable page exactly once; every request from a node's own
address, and every URL a node's segments hold requested from that node's address), and from the crawl db
read back from HBase (every page stored once, nothing pending).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from fetchers.records import FetchResult
from jobs import cluster
from pipeline.harness.faults.netproxy import ProxyProcess, Route
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.hbase import HBaseStore
from pipeline.storage.segments import DONE_DIR, Segments
from tests.e2e.test_fleet_netns import _check_hbase, _via, _wait_heartbeats
from tests.fixtures.hbase import HOST as HBASE_HOST
from tests.fixtures.hbase import PORT as HBASE_PORT
from tests.fixtures.machines import Machine, Machines
from tests.fixtures.rabbitmq import check_truth, key
from tests.fixtures.tlsbroker import TlsRabbit, Users

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(1500)]

NODES = 3
DEPTH = 2
DELAY_MS = 2.0  # added each way between a machine and the broker and HBase: a network, not loopback


def _segments_root(kind: str, tag: str) -> str:
    if kind == "hdfs":
        return f"{cluster.namenode_uri()}/tmp/crawlfleet-e2e/{tag}/segments"
    return f"s3://crawlfleet/e2e-{tag}/segments"


def _node_urls(root: str, node: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(host, path) of the URLs the node's merged segments hold (kept under .done/ for this test): those the
    node had an HTTP answer for, and those it had none for (a timeout, a DNS or connect failure under load:
    the request may never have reached the server, and the URL is retried, maybe by another node)."""
    segs = Segments(root)
    answered: set[tuple[str, str]] = set()
    unanswered: set[tuple[str, str]] = set()
    try:
        paths = segs.fs.ls(f"{segs.base}/{DONE_DIR}/{node}", detail=False)
    except FileNotFoundError:  # S1 gave this node no batch (a small crawl)
        return answered, unanswered
    for path in paths:
        with segs.fs.open(path, "rb") as fh:
            for line in fh:
                if line.strip():
                    result = FetchResult.from_json(json.loads(line))
                    (answered if result.status else unanswered).add(key(result.url))
    return answered, unanswered


def _summary(log: Path) -> dict[str, Any]:
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("{") and '"pages_fetched"' in line:
            return dict(json.loads(line))
    raise AssertionError(f"the dispatcher printed no summary:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.mark.parametrize("run", ["A-hdfs-yarn", "B-s3-spark"])
def test_the_fleet_on_machines_that_share_nothing(
    machines: Machines, run: str, hbase_prefix: str, hdfs_yarn: str, s3_server: Any, spark_standalone: str,
    tmp_path: Path,
) -> None:
    kind = "hdfs" if run.startswith("A") else "s3"
    runner = ["--runner", "hadoop"] if kind == "hdfs" else ["--runner", "spark", "--spark-master", cluster.spark_master()]
    tag = uuid.uuid4().hex[:8]
    prefix = f"{hbase_prefix}m{tag[:4]}"
    root = _segments_root(kind, tag)
    node_names = [f"tn{i}" for i in range(1, NODES + 1)]
    rabbit = TlsRabbit(tmp_path / "rabbit", broker_hosts=(machines.host,), nodes=tuple(node_names))
    rabbit.start()
    proxy: ProxyProcess | None = None
    try:
        users: Users = rabbit.users(tmp_path / "rabbit" / "secrets", *node_names)
        with TestbedProcess(6, 12, seed=37, workdir=tmp_path / "tb") as tb:
            d = DELAY_MS / 1000
            proxy = ProxyProcess([
                Route("tcp", machines.host, 0, "127.0.0.1", rabbit.tls_port, d, d),
                Route("tcp", machines.host, 0, HBASE_HOST, HBASE_PORT, d, d),
                Route("udp", machines.host, 0, "127.0.0.1", tb.dns_port),
            ])  # fmt: skip
            amqp_port, thrift_port, dns_port = proxy.start()
            s3 = cluster.s3_options()
            base = {k: v for k, v in os.environ.items() if not k.startswith(("CRAWLFLEET_", "AWS_"))}
            base.update({
                "PYTHONUNBUFFERED": "1", "HADOOP_USER_NAME": "root",
                "CRAWLFLEET_STORE_KIND": "hbase", "CRAWLFLEET_STORE_HBASE_HOST": machines.host,
                "CRAWLFLEET_STORE_HBASE_PORT": str(thrift_port), "CRAWLFLEET_STORE_HBASE_PREFIX": prefix,
                "CRAWLFLEET_FLEET_SEGMENTS_DIR": root, "CRAWLFLEET_FLEET_SEGMENT_RETENTION_S": "-1",
                "CRAWLFLEET_FLEET_LINK_LEASE_S": "20",  # heartbeats at the default 2 s: a node silent 4 s is dead
                "CRAWLFLEET_DISPATCH_SERVICE": f"svc{tag}", "CRAWLFLEET_SCOPE_MAX_DEPTH": str(DEPTH),
                "CRAWLFLEET_DNS_SERVERS": f"{machines.host}:{dns_port}",
                "CRAWLFLEET_SECURITY_ALLOW_NETWORKS": "127.0.10.0/24",
                "CRAWLFLEET_POLITENESS_MIN_HOST_DELAY_S": "0.02",
                "AWS_ENDPOINT_URL": str(s3["endpoint_url"]), "AWS_ACCESS_KEY_ID": str(s3["key"]),
                "AWS_SECRET_ACCESS_KEY": str(s3["secret"]), "AWS_DEFAULT_REGION": "us-east-1",
            })  # fmt: skip

            def tls_env(m: Machine, cert: str, user: str) -> dict[str, str]:
                files = {k: str(m.put(Path(v))) for k, v in rabbit.client(cert).items()}
                return {**files, "CRAWLFLEET_BROKER_URL": _via(rabbit.tls_url(user), machines.host, amqp_port),
                        "CRAWLFLEET_FLEET_BROKER_PASSWORD_FILE": str(m.put(users.password_file(user)))}  # fmt: skip

            def central(m: Machine) -> dict[str, str]:  # the dispatcher's and the link jobs' rights
                return {**base, **tls_env(m, "dispatcher", "crawlfleet-dispatcher"),
                        "CRAWLFLEET_FLEET_KEY_FILE": str(m.put(users.secrets / "fleet.key"))}  # fmt: skip

            addr_of: dict[str, str] = {}
            for name in node_names:
                m = machines.add(name)
                addr_of[name] = m.addr
                env = {**base, **tls_env(m, name, f"node-{name}"),
                       "CRAWLFLEET_FLEET_NODE_KEY_FILE": str(m.put(users.node_key_file(name)))}  # fmt: skip
                m.popen([sys.executable, "-m", "pipeline.cli", "worker", "--node", name, "--slots", "4",
                         "--loglevel", "INFO"], env, "worker")  # fmt: skip
            _wait_heartbeats(rabbit, users, set(addr_of))
            linkers = [machines.add(f"links{i}") for i in (1, 2)]
            for m in linkers:
                m.popen([sys.executable, "-m", "pipeline.cli", "links", "--out", str(m.home / "out"), *runner,
                         "--work-dir", str(m.home / "jobs"), "--max-segments", "8"], central(m), "links")  # fmt: skip
            disp = machines.add("dispatcher")
            proc = disp.popen([sys.executable, "-m", "pipeline.cli", "dispatcher", *tb.seeds, "--out",
                               str(disp.home / "out"), "--json", "--no-progress"], central(disp), "dispatcher")  # fmt: skip
            # A machine sees no other machine's files: the dispatcher's crawl directory is not there for a node.
            seen = machines.made[0].run(["sh", "-c", f"ls {disp.home} {tmp_path / 'rabbit'} 2>&1; echo done"])
            assert "No such file" in seen.stdout and "out" not in seen.stdout.split(), seen.stdout
            deadline = time.monotonic() + 1200
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(1)
            assert proc.returncode == 0, (tmp_path / "logs" / "dispatcher-dispatcher.log").read_text()[-4000:]
            summary = _summary(tmp_path / "logs" / "dispatcher-dispatcher.log")
            for m in machines.made:
                m.stop()
            stats = proxy.stop()
            proxy = None

            assert summary["pages_fetched"] > 0 and summary["fleet"]["link_lag"]["count"] > 0, summary
            truth = tb.truth(max_depth=DEPTH)
            check_truth(tb, truth, nodes=1)  # robots.txt once per host: the nodes share it through HBase
            _check_hbase(prefix, truth)
            entries = tb.read_access_log()
            clients = collections.Counter(e["client"] for e in entries)
            assert clients and set(clients) <= set(addr_of.values()), clients
            by_key: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
            for e in entries:
                by_key[(e["host"], e["path"])].add(e["client"])
            forbidden = {key(u) for u in truth["forbidden"]}
            held: collections.Counter[tuple[str, str]] = collections.Counter()
            for name, addr in addr_of.items():
                urls, failed = _node_urls(root, name)
                held.update(urls)
                requested = {u for u in urls if u in by_key}
                assert urls - requested <= forbidden, sorted(urls - requested - forbidden)[:5]
                wrong = sorted(u for u in requested if by_key[u] != {addr})
                assert wrong == [], (name, addr, {u: sorted(by_key[u]) for u in wrong[:5]})
                if failed:
                    print(f"{name}: {len(failed)} URLs without an answer in its segments, e.g. {sorted(failed)[:3]}")
            # every page went once through a node's segment and the link jobs, answered
            pages = {key(u) for u in truth["pages"]}
            assert pages <= set(held), sorted(pages - set(held))[:5]
            assert [u for u in pages if held[u] > 1] == []
            amqp, thrift, _dns = stats
            assert amqp["connections"] >= NODES + 3 and thrift["connections"] > 0, (amqp, thrift)
    finally:
        if proxy is not None:
            proxy.stop()
        rabbit.stop()
        store = HBaseStore(HBASE_HOST, HBASE_PORT, prefix=prefix)
        try:
            store.drop()
        finally:
            store.close()
        segs = Segments(root)
        if segs.fs.exists(segs.base.rsplit("/", 1)[0]):
            segs.fs.rm(segs.base.rsplit("/", 1)[0], recursive=True)
