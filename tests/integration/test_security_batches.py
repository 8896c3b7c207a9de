"""Signed batches on a real broker: a fetch node (a real ``crawlfleet worker`` over TLS with its own
user and key) refuses unsigned, mis-signed, tampered, re-routed and replayed batches, and its SSRF guard
holds against a validly signed batch naming loopback and metadata addresses.

Published by the dispatcher's user straight onto the node's queue, as a compromised dispatcher key or a
replaying eavesdropper would. Judged from the testbed's access log (no request for any refused batch's
host, the replayed batch's page fetched once), a canary socket on loopback (never connected to), the
node's segments (only the accepted batches' results), the dead-letter queue (every refused batch, with
the node's logged reason), and the node's log (never a secret).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kombu import Producer

from fetchers.records import Batch, FetchResult, UrlTask
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.transport.wire import signing, topology
from pipeline.transport.wire.amqp import fleet_connection
from pipeline.transport.wire.batchsend import BatchEncoder, TaskMessage, publish_kombu
from pipeline.transport.wire.msgauth import MessageKeys, signed_headers
from tests.fixtures.rabbitmq import ROOT
from tests.fixtures.tlsbroker import TlsRabbit, Users, fleet_as, two_node_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(360)]

LEASE_S = 120.0
SERVICE = "sec"


class Canary:
    """A loopback listener that counts connections: the address a forged batch points at."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TlsRabbit, Users]]:
    yield from two_node_broker(tmp_path_factory.mktemp("tlsrabbit"))


def node_env(rabbit: TlsRabbit, users: Users, node: str, *, dns_port: int) -> dict[str, str]:
    return dict(
        os.environ, **rabbit.client(node), CRAWLFLEET_NODE=node,
        CRAWLFLEET_BROKER_URL=rabbit.tls_url(f"node-{node}"),
        CRAWLFLEET_FLEET_BROKER_PASSWORD_FILE=str(users.password_file(f"node-{node}")),
        CRAWLFLEET_FLEET_NODE_KEY_FILE=str(users.node_key_file(node)),
        CRAWLFLEET_DNS_SERVERS=f"127.0.0.1:{dns_port}", CRAWLFLEET_SECURITY_ALLOW_NETWORKS="127.0.10.0/24",
        # No dispatcher answers serial checks here (the test publishes the batches): off, not 2 s each.
        CRAWLFLEET_DISPATCH_HEARTBEAT_S="1", CRAWLFLEET_DISPATCH_SERIAL_CHECK="0",
        CRAWLFLEET_DISPATCH_LEASE_S=str(LEASE_S), PYTHONUNBUFFERED="1",
    )  # fmt: skip


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


def _wait(pred: Any, *, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; log:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


def test_a_node_refuses_forged_tampered_and_replayed_batches(
    broker: tuple[TlsRabbit, Users], tmp_path: Path
) -> None:
    rabbit, users = broker
    canary = Canary()
    with TestbedProcess(8, 4, seed=5, workdir=tmp_path / "tb") as tb:
        seeds = tb.seeds
        sink = {"store": f"sqlite:{tmp_path / 'node-store.db'}", "segments": str(tmp_path / "segs"), "warc": "",
                "keep_body": True}  # fmt: skip
        encoder = BatchEncoder(scope_json=None, sink_json=sink)
        dispatcher = MessageKeys(fleet_key=users.fleet_key)
        serial = iter(range(1, 100))

        def task(urls: list[str], *, node: str = "n1", issued_at: float | None = None) -> TaskMessage:
            batch = Batch(serial=next(serial), fetcher_id=node, service=SERVICE, issued_at=issued_at or time.time(),
                          tasks=[UrlTask(url=u, url_id=i + 1, depth=0) for i, u in enumerate(urls)])  # fmt: skip
            return encoder.encode(batch, node="n1", incarnation=None, expires_s=None)

        def signed(msg: TaskMessage, keys: MessageKeys, *, node: str = "n1") -> TaskMessage:
            msg.headers.update(signed_headers(keys, kind="batch", node=node, body=msg.body))
            return msg

        unsigned = task([seeds[0]])
        wrong_key = signed(task([seeds[1]]), MessageKeys(own=signing.node_key("not-the-fleet-key", "n1")))
        tampered = signed(task([seeds[2]]), dispatcher)
        tampered.body = tampered.body.replace(_host(seeds[2]).encode(), _host(seeds[3]).encode())
        other_node = signed(
            task([seeds[6]], node="n2"), dispatcher, node="n2"
        )  # n2's batch put on n1's queue
        too_old = signed(task([seeds[5]], issued_at=time.time() - LEASE_S - 60), dispatcher)
        good = signed(task([seeds[4]]), dispatcher)
        ssrf = signed(task([f"http://127.0.0.1:{canary.port}/", f"http://[::1]:{canary.port}/",
                            "http://169.254.169.254/latest/meta-data/", f"http://127.0.0.1.nip.io:{canary.port}/"]), dispatcher)  # fmt: skip

        fleet = fleet_as(rabbit, users, "crawlfleet-dispatcher", "dispatcher")
        log_path = tmp_path / "worker.log"
        with fleet_connection(fleet, confirm=True) as conn:
            ch = conn.channel()
            topology.dead_queue()(ch).declare()
            topology.fetch_queue("n1")(ch).declare()
            results = topology.results_queue(fleet, SERVICE)(conn.channel())
            results.declare()
            producer = Producer(conn.channel())
            for msg in (unsigned, wrong_key, tampered, other_node, too_old, good, ssrf):
                publish_kombu(producer, msg)
            with open(log_path, "ab") as log:
                worker = subprocess.Popen(
                    [sys.executable, "-m", "pipeline.cli", "worker", "--node", "n1", "--slots", "2", "--loglevel", "INFO"],
                    env=node_env(rabbit, users, "n1", dns_port=tb.dns_port), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                )  # fmt: skip
            try:
                replies: list[dict[str, Any]] = []

                def take_replies() -> bool:
                    while (m := results.get(no_ack=True)) is not None:
                        replies.append(json.loads(m.body))
                    return len(replies) >= 2

                _wait(take_replies, timeout_s=120, what="two replies", log=log_path)
                publish_kombu(producer, good)  # the accepted batch again, byte for byte: a replay
                dead = topology.dead_queue()(conn.channel())
                _wait(lambda: dead.queue_declare(passive=True).message_count >= 6, timeout_s=60,
                      what="six dead letters", log=log_path)  # fmt: skip
                time.sleep(1.0)  # what a wrongly accepted replay would have fetched by now
                dead_letters = dead.queue_declare(passive=True).message_count
            finally:
                worker.terminate()
                worker.wait(30)
        assert dead_letters == 6

    text = log_path.read_text()
    for reason in ("unsigned", "bad signature", "replayed: issued", "replayed: batch"):
        assert f": {reason}" in text, reason
    assert text.count("refused batch for node n1") == 6
    # Nothing of a refused batch was requested; the accepted batch's page once, its replay never.
    requested = [(e["host"], e["path"]) for e in tb.read_access_log()]
    hosts = {h.split(":")[0] for h, _ in requested}
    for refused in (seeds[0], seeds[1], seeds[2], seeds[3], seeds[5], seeds[6]):
        assert _host(refused) not in hosts, refused
    accepted = (_host(seeds[4]), urlsplit(seeds[4]).path or "/")
    assert sum(1 for h, path in requested if (h.split(":")[0], path) == accepted) == 1
    # The SSRF guard held on the node, whatever the signed batch said.
    assert canary.hits == 0
    ssrf_reply = next(r for r in replies if any("169.254" in x["url"] for x in r["results"]))
    assert all(x["error_class"] and not x["status"] for x in ssrf_reply["results"]), ssrf_reply["results"]
    # The node's segments hold the two accepted batches' results and nothing else.
    stored = {FetchResult.from_json(json.loads(line)).url for seg in (tmp_path / "segs").rglob("*.jsonl")
              for line in seg.read_text().splitlines() if line.strip()}  # fmt: skip
    assert stored == {seeds[4]} | {x["url"] for x in ssrf_reply["results"]}
    # No secret in the node's log.
    for secret in (users.password("node-n1"), users.fleet_key, users.node_key_file("n1").read_text().strip()):
        assert secret not in text
