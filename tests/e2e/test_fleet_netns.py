"""More than one node for real: three fetch nodes, each in a network namespace of its own, crawl the
testbed on the design card's loop (nodes store pages in HBase and write segments; ``crawlfleet links``
feeds the pending set).

Each node has its own address on a bridge (``scripts/netns.sh``). RabbitMQ, HBase Thrift and the
testbed's DNS listen on loopback only, so the nodes reach them through forwarders on the bridge
address (``pipeline/harness/faults/netproxy.py``, with a small added delay each way); the testbed's
127.0.10.x addresses are routed from each namespace to the root namespace, so the testbed sees each
node's own address as the client. The dispatcher and the link jobs run in the root namespace.

The fleet runs as across machines (docs/SECURITY.md): a private RabbitMQ configured by
``scripts/svc-rabbitmq.sh conf`` (TLS with peer verification; its certificate names the bridge
address the nodes dial), users from ``scripts/rabbit-users.sh`` (the dispatcher and links with the
dispatcher's user and the fleet key; each node with its own user, client certificate and node key), so
every node's broker traffic is amqps:// to a non-loopback address, and plain AMQP would be refused.

Judged from the testbed's access log (every reachable page exactly once; every request from a node's
address, and every URL a node's segments hold requested from that node's address), from HBase (every
page stored once, nothing left pending) and from the forwarders' counters (the nodes' broker, store
and DNS traffic crossed the namespace boundary).
"""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from fetchers.records import FetchResult
from pipeline.harness.faults.netproxy import ProxyProcess, Route
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.settings import load_settings
from pipeline.storage.hbase import HBaseStore
from tests.fixtures.hbase import HOST as HBASE_HOST
from tests.fixtures.hbase import PORT as HBASE_PORT
from tests.fixtures.rabbitmq import MAX_DEPTH, check_truth, key
from tests.fixtures.tlsbroker import TlsRabbit, Users
from tests.services import need_namespaces

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "netns.sh"
NODES = 3
TESTBED_NET = "127.0.10.0/24"  # the testbed's host addresses (pipeline/harness/testbed/model.py)
DELAY_MS = 2.0  # added each way between a node and the services: a network, not loopback


@dataclass(frozen=True, slots=True)
class NetNode:
    ns: str
    addr: str


@dataclass(frozen=True, slots=True)
class Net:
    bridge: str
    host: str  # the root namespace's address on the bridge
    nodes: tuple[NetNode, ...]


def _free_subnet() -> int:
    """X of a 10.231.X.0/24 no interface or route here uses yet."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    used += subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=True).stdout
    for x in random.sample(range(1, 255), 254):
        if f"10.231.{x}." not in used:
            return x
    raise RuntimeError("no free 10.231.X.0/24")


def _netns(*args: str) -> None:
    subprocess.run([str(SCRIPT), *args], check=True, capture_output=True, text=True, timeout=60)


@pytest.fixture
def netns_nodes() -> Iterator[Net]:
    """NODES namespaces on a fresh bridge, removed at the end even when the test fails (ask for this
    fixture first: the processes inside end before it tears down)."""
    need_namespaces()
    tag = uuid.uuid4().hex[:5]
    x = _free_subnet()
    net = Net(f"cfb{tag}", f"10.231.{x}.1",
              tuple(NetNode(f"cf{tag}n{i}", f"10.231.{x}.{i + 1}") for i in range(1, NODES + 1)))  # fmt: skip
    made: list[str] = []
    try:
        for node in net.nodes:
            made.append(node.ns)
            _netns("up", node.ns, f"{node.addr}/24", "--bridge", net.bridge, "--host", f"{net.host}/24",
                   "--route", TESTBED_NET)  # fmt: skip
        yield net
    finally:
        for ns in made:
            subprocess.run([str(SCRIPT), "down", ns, "--bridge", net.bridge], check=False, timeout=60)
        subprocess.run(["ip", "link", "del", net.bridge], check=False, capture_output=True)


def _wait_heartbeats(rabbit: TlsRabbit, users: Users, nodes: set[str], *, timeout_s: float = 120) -> None:
    """Until every node has sent a heartbeat (all three then get batches from the start)."""
    from pipeline.transport.wire import topology
    from pipeline.transport.wire.amqp import fleet_connection
    from pipeline.transport.wire.messages import decode, parse_heartbeat

    tls = rabbit.client("dispatcher")
    fleet = load_settings(overrides={"fleet": {
        "broker_url": rabbit.tls_url("crawlfleet-dispatcher"), "tls_ca": tls["CRAWLFLEET_FLEET_TLS_CA"],
        "tls_cert": tls["CRAWLFLEET_FLEET_TLS_CERT"], "tls_key": tls["CRAWLFLEET_FLEET_TLS_KEY"],
        "broker_password_file": str(users.password_file("crawlfleet-dispatcher"))}}).fleet  # fmt: skip
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    with fleet_connection(fleet) as conn:
        queue = topology.heartbeat_queue(fleet, service=f"netns{uuid.uuid4().hex[:6]}", ttl_s=10)(
            conn.channel()
        )
        queue.declare()
        while seen < nodes:
            assert time.monotonic() < deadline, f"heard only {sorted(seen)} of {sorted(nodes)}"
            msg = queue.get(no_ack=True)
            if msg is None:
                time.sleep(0.1)
                continue
            obj = decode(msg.body, content_type=msg.content_type, content_encoding=msg.content_encoding,
                         max_bytes=fleet.max_message_bytes)  # fmt: skip
            seen.add(parse_heartbeat(obj).node)
        queue.delete()


def _via(url: str, host: str, port: int) -> str:
    """``url`` with its host and port replaced (credentials and path kept)."""
    parts = urlsplit(url)
    cred = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{cred + '@' if cred else ''}{host}:{port}"))


def _segment_urls(segments: Path, node: str) -> set[tuple[str, str]]:
    """(host, path) of every URL the node's closed segments hold with an HTTP answer (the link jobs moved
    them to .done). A result without one (a timeout, a DNS or connect failure under load) may never have
    reached the server, and its URL is retried, maybe by another node."""
    out: set[tuple[str, str]] = set()
    for seg in (segments / ".done" / node).glob("*.jsonl"):
        for line in seg.read_text().splitlines():
            if line.strip():
                result = FetchResult.from_json(json.loads(line))
                if result.status:
                    out.add(key(result.url))
    return out


def _check_hbase(prefix: str, truth: dict[str, Any]) -> None:
    store = HBaseStore(HBASE_HOST, HBASE_PORT, prefix=prefix)
    try:
        pages = list(store.iter_pages())
        assert store.pending_hosts() == []
    finally:
        store.close()
    counted = collections.Counter(p.url for p in pages)
    reached = set(counted) | {p.final_url for p in pages}
    assert [u for u, n in counted.items() if n > 1] == []
    assert [u for u in truth["pages"] if u not in reached] == []


@pytest.fixture
def ns_prefix(hbase_prefix: str) -> Iterator[str]:
    """This test's HBase table prefix; its tables are dropped at the end (the session's drop of
    ``hbase_prefix`` matches ``PREFIX_`` only)."""
    prefix = f"{hbase_prefix}ns"
    yield prefix
    store = HBaseStore(HBASE_HOST, HBASE_PORT, prefix=prefix)
    try:
        store.drop()
    finally:
        store.close()


def _secrets_found(root: Path, secrets: dict[str, str]) -> list[tuple[str, str]]:
    """(file, secret name) for every file under ``root`` holding a secret's text."""
    out = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            out += [(str(path.relative_to(root)), name) for name, s in secrets.items() if s.encode() in data]
    return out


@pytest.fixture
def tls_broker(netns_nodes: Net, tmp_path: Path) -> Iterator[tuple[TlsRabbit, Users]]:
    """A private TLS broker whose certificate names the bridge address; users for the three nodes."""
    rabbit = TlsRabbit(
        tmp_path / "rabbit",
        broker_hosts=(netns_nodes.host,),
        nodes=tuple(f"tn{i}" for i in range(1, NODES + 1)),
    )
    rabbit.start()
    try:
        yield rabbit, rabbit.users(tmp_path / "rabbit" / "secrets", *(f"tn{i}" for i in range(1, NODES + 1)))
    finally:
        rabbit.stop()


def test_three_nodes_in_their_own_namespaces_crawl_the_testbed(
    netns_nodes: Net, tls_broker: tuple[TlsRabbit, Users], ns_prefix: str, fleet: Any, tmp_path: Path
) -> None:
    net = netns_nodes
    prefix = ns_prefix
    rabbit, users = tls_broker
    env = {"CRAWLFLEET_STORE_KIND": "hbase",
           "CRAWLFLEET_STORE_HBASE_HOST": HBASE_HOST, "CRAWLFLEET_STORE_HBASE_PORT": str(HBASE_PORT),
           "CRAWLFLEET_STORE_HBASE_PREFIX": prefix, **rabbit.client("dispatcher"),
           "CRAWLFLEET_FLEET_BROKER_PASSWORD_FILE": str(users.password_file("crawlfleet-dispatcher")),
           "CRAWLFLEET_FLEET_KEY_FILE": str(users.secrets / "fleet.key")}  # fmt: skip
    rabbitmq = rabbit.tls_url("crawlfleet-dispatcher")
    with TestbedProcess(12, 30, seed=31, workdir=tmp_path / "tb") as tb:
        assert all(ip.startswith("127.0.10.") for ip in tb.ips if ip != "::1"), (
            tb.ips
        )  # ::1: v6.crawl.test only
        d = DELAY_MS
        proxy = ProxyProcess([
            Route("tcp", net.host, 0, "127.0.0.1", rabbit.tls_port, d / 1000, d / 1000),
            Route("tcp", net.host, 0, HBASE_HOST, HBASE_PORT, d / 1000, d / 1000),
            Route("udp", net.host, 0, "127.0.0.1", tb.dns_port),
        ])  # fmt: skip
        amqp_port, thrift_port, dns_port = proxy.start()
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, extra_env=env)
        addr_of: dict[str, str] = {}
        stats: list[dict[str, Any]] = []
        try:
            for i, nn in enumerate(net.nodes, start=1):
                name = f"tn{i}"
                node_env = dict(
                    {k: v for k, v in f.env.items() if k != "CRAWLFLEET_FLEET_KEY_FILE"}, **rabbit.client(name),
                    CRAWLFLEET_BROKER_URL=_via(rabbit.tls_url(f"node-{name}"), net.host, amqp_port),
                    CRAWLFLEET_FLEET_BROKER_PASSWORD_FILE=str(users.password_file(f"node-{name}")),
                    CRAWLFLEET_FLEET_NODE_KEY_FILE=str(users.node_key_file(name)),
                    CRAWLFLEET_DNS_SERVERS=f"{net.host}:{dns_port}",
                    CRAWLFLEET_FLEET_NODE_STORE=f"hbase://{net.host}:{thrift_port}/{prefix}",
                )  # fmt: skip
                addr_of[name] = nn.addr
                log = open(f.workdir / f"worker-{name}.log", "ab")  # noqa: SIM115 - owned by the process
                cmd = ["ip", "netns", "exec", nn.ns, sys.executable, "-m", "pipeline.cli", "worker", "--node", name,
                       "--slots", "4", "--loglevel", "INFO"]  # fmt: skip
                # `ip netns exec` execs the worker, which execs celery: the pid is the worker's; the
                # fleet fixture stops it with the others.
                f.workers[name] = subprocess.Popen(
                    cmd, env=node_env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
                )
            _wait_heartbeats(rabbit, users, set(addr_of))
            f.start_dispatcher()  # and `crawlfleet links` (the fleet's only link path)
            summary = f.wait_dispatcher(timeout_s=240)
        finally:
            f.stop()  # every process inside the namespaces ends before the fixture removes them
            stats = proxy.stop()
        assert summary["pages_fetched"] > 0
        # S1's serial checks crossed TLS with the node users' rights (a refused one fails open, uncounted).
        assert summary["fleet"]["serial_checks"] > 0, summary["fleet"]

        truth = tb.truth(max_depth=MAX_DEPTH)
        check_truth(tb, truth, nodes=NODES)
        _check_hbase(prefix, truth)

        entries = tb.read_access_log()
        clients = collections.Counter(e["client"] for e in entries)
        # No request from anywhere else. (Which nodes fetch is S1's choice by u = p*s + q - r: in a crawl this
        # small one node may take every batch, so not every node need appear.)
        assert clients and set(clients) <= set(addr_of.values()), clients
        by_key: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
        for e in entries:
            by_key[(e["host"], e["path"])].add(e["client"])
        segments = f.out / "node-segments"
        forbidden = {key(u) for u in truth["forbidden"]}  # robots.txt disallows them: results, no request
        for name, addr in addr_of.items():
            urls = _segment_urls(segments, name)
            requested = {u for u in urls if u in by_key}
            assert urls - requested <= forbidden, sorted(urls - requested - forbidden)[:5]
            wrong = sorted(u for u in requested if by_key[u] != {addr})
            assert wrong == [], (name, addr, wrong[:5], [by_key[u] for u in wrong[:5]])

        # The nodes' broker, store and DNS traffic crossed the namespace boundary through the forwarders.
        amqp, thrift, dns = stats
        assert amqp["connections"] >= NODES and amqp["bytes_down"] > 0, amqp
        assert thrift["connections"] >= len(clients) and thrift["bytes_up"] > 0, (
            thrift
        )  # the nodes that stored pages
        assert dns["datagrams_up"] > 0 and dns["datagrams_down"] > 0, dns

    # Secrets: no log, segment, crawl file or summary of the crawl holds any (the broker's own
    # directory, which keeps the secrets and certificates, aside).
    secrets = {"fleet key": users.fleet_key, "dispatcher password": users.password("crawlfleet-dispatcher")}
    for i in range(1, NODES + 1):
        secrets[f"tn{i} password"] = users.password(f"node-tn{i}")
        secrets[f"tn{i} key"] = users.node_key_file(f"tn{i}").read_text().strip()
    found = [
        hit for sub in tmp_path.iterdir() if sub.name != "rabbit" for hit in _secrets_found(sub, secrets)
    ]
    assert found == []
    assert all(s not in json.dumps(summary) for s in secrets.values())
