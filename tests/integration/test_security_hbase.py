"""The HBase gateway's bind rule, from another network namespace: the default config lets no other
address in, and Thrift bound to the fleet's address serves the fleet's network only.

- The shared HBase (scripts/svc-hbase.sh defaults; only connected to, never restarted): from a
  namespace on a bridge, its Thrift, ZooKeeper, master and region-server ports on the root namespace's
  bridge address refuse the connection; they listen on 127.0.0.1 alone.
- A Thrift server of our own over the shared master (``svc-hbase.sh thrift-run``), bound by
  ``CRAWLFLEET_HBASE_THRIFT_BIND`` to the bridge address: a node in the namespace lists the tables through
  it, while loopback (an address it was not bound to) refuses.
- ``CRAWLFLEET_HBASE_THRIFT_BIND=0.0.0.0`` (every address) is refused by both scripts unless asked for
  explicitly.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.harness.faults.procs import Managed, wait_until
from pipeline.harness.faults.services import free_port, thrift_answers
from tests.fixtures.hbase import PORT as HBASE_PORT
from tests.services import need_namespaces

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
HBASE_PORTS = {"thrift": HBASE_PORT, "zookeeper": 12181, "master": 16000, "regionserver": 16020}


@dataclass(frozen=True, slots=True)
class Ns:
    name: str
    addr: str
    host: str
    bridge: str


@pytest.fixture
def namespace() -> Iterator[Ns]:
    need_namespaces()
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    x = next(x for x in random.sample(range(1, 255), 254) if f"10.232.{x}." not in used)
    tag = uuid.uuid4().hex[:5]
    ns = Ns(f"cfh{tag}", f"10.232.{x}.2", f"10.232.{x}.1", f"cfhb{tag}")
    try:
        subprocess.run([str(SCRIPTS / "netns.sh"), "up", ns.name, f"{ns.addr}/24", "--bridge", ns.bridge,
                        "--host", f"{ns.host}/24"], check=True, capture_output=True, timeout=60)  # fmt: skip
        yield ns
    finally:
        subprocess.run(
            [str(SCRIPTS / "netns.sh"), "down", ns.name, "--bridge", ns.bridge], check=False, timeout=60
        )
        subprocess.run(["ip", "link", "del", ns.bridge], check=False, capture_output=True)


def connect_from(ns: Ns, host: str, port: int) -> str:
    """ "ok" or the error of a TCP connection made from inside ``ns``."""
    code = ("import socket,sys\ns=socket.socket();s.settimeout(5)\n"
            "try:\n s.connect((sys.argv[1],int(sys.argv[2])));print('ok')\nexcept OSError as e:\n print(type(e).__name__)")  # fmt: skip
    out = subprocess.run(["ip", "netns", "exec", ns.name, sys.executable, "-c", code, host, str(port)],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    return out.stdout.strip()


def listen_addresses(port: int) -> set[str]:
    out = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[3].rsplit(":", 1)[0] for line in out.splitlines() if line.strip()}


def test_the_default_hbase_lets_no_other_address_in(hbase_thrift: tuple[str, int], namespace: Ns) -> None:
    for name, port in HBASE_PORTS.items():
        assert listen_addresses(port) <= {"127.0.0.1"}, (name, listen_addresses(port))
        assert connect_from(namespace, namespace.host, port) == "ConnectionRefusedError", name
        assert connect_from(namespace, "127.0.0.1", port) == "ConnectionRefusedError", (
            name
        )  # its own loopback


def test_thrift_bound_to_the_fleets_address_serves_that_network_only(
    hbase_thrift: tuple[str, int], namespace: Ns, tmp_path: Path
) -> None:
    port = free_port()
    env = dict(os.environ, CRAWLFLEET_HBASE_THRIFT_BIND=namespace.host)
    thrift = Managed(
        "thrift", [str(SCRIPTS / "svc-hbase.sh"), "thrift-run", str(port)], env, tmp_path / "thrift.log"
    )
    thrift.start()
    try:
        # Wait for the bridge address to appear, then say what else listens (a stricter wait condition
        # timed out once in a loaded make test without telling which addresses it saw).
        wait_until(
            lambda: namespace.host in listen_addresses(port),
            timeout_s=180,
            every_s=1.0,
            what=f"Thrift on the bridge ({namespace.host}:{port}; log {tmp_path / 'thrift.log'})",
        )
        assert listen_addresses(port) == {namespace.host}, listen_addresses(port)
        code = ("import happybase,sys\nc=happybase.Connection(sys.argv[1],int(sys.argv[2]),timeout=20000)\n"
                "print(type(c.tables()).__name__)")  # fmt: skip
        out = subprocess.run(["ip", "netns", "exec", namespace.name, sys.executable, "-c", code, namespace.host, str(port)],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
        assert out.stdout.strip() == "list", out.stderr[-2000:]
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0  # not bound to loopback: nothing answers there
        assert not thrift_answers(port)
    finally:
        thrift.terminate(timeout_s=10)


@pytest.mark.parametrize("script", ["svc-hbase.sh", "hbase-private.sh"])
def test_binding_thrift_to_every_address_is_refused(script: str, tmp_path: Path) -> None:
    env = dict(os.environ, CRAWLFLEET_HBASE_THRIFT_BIND="0.0.0.0", HBASE_PRIVATE_THRIFT_BIND="0.0.0.0",
               HBASE_PRIVATE_DATA=str(tmp_path), HBASE_PRIVATE_ZK_PORT="1", HBASE_PRIVATE_MASTER_PORT="1",
               HBASE_PRIVATE_RS_PORT="1", HBASE_PRIVATE_THRIFT_PORT="1")  # fmt: skip
    out = subprocess.run(
        [str(SCRIPTS / script), "thrift-run", "1"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "every address" in out.stderr
