"""PikaSession (pipeline/transport/wire/pika_session.py) on the real broker, in the test session's private vhost.

It receives and acks (an acked message is not delivered again; an unacked one is), survives its
connection being closed by the broker (``rabbitmqctl close_connection`` on its own connection only:
the shared broker is never stopped), counts that outage as paused time, hands back task messages that
were never confirmed, and copies bad messages to the dead-letter queue with their reason.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kombu import Connection, Producer

from fetchers.records import Batch, UrlTask
from pipeline.settings import FleetSettings
from pipeline.transport.wire import topology
from pipeline.transport.wire.batchsend import BatchEncoder
from pipeline.transport.wire.messages import BadMessage, decode
from pipeline.transport.wire.pika_session import PikaSession

pytestmark = [pytest.mark.integration]


def _batch() -> Batch:
    return Batch(serial=7, fetcher_id="n1#0", tasks=[UrlTask("http://a.test/", 1, 0)], service="svc")


def _session(url: str, service: str) -> PikaSession:
    s = PikaSession(FleetSettings(broker_url=url), service=service, heartbeat_ttl_s=5.0, retry_s=0.2)
    assert s.connect()
    return s


def _publish(url: str, service: str, bodies: list[bytes], *, submit: bool = False, ctype: str = "application/json") -> None:
    fleet = FleetSettings(broker_url=url)
    exchange = topology.submit_exchange() if submit else topology.results_exchange(fleet)
    with Connection(url) as conn:
        producer = Producer(conn.channel())
        for body in bodies:
            producer.publish(body, exchange=exchange, routing_key=service, content_type=ctype,
                             content_encoding="utf-8", retry=True)  # fmt: skip


def _pump_until(s: PikaSession, done: Callable[[], bool], *, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out; inbox {len(s.inbox)}, reconnects {s.reconnects}"
        s.pump(0.1)


def _ctl(*args: str) -> str:
    for node in (os.environ.get("RABBITMQ_NODENAME", "rabbit@localhost"), None):
        cmd = ["rabbitmqctl", "-q", *(["-n", node] if node else []), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if done.returncode == 0:
            return done.stdout
    raise AssertionError(f"rabbitmqctl {args} failed: {done.stderr}")


def _close_my_connection(url: str, service: str) -> None:
    """Close this session's connection (by its client-provided name, in our vhost) from the broker side."""
    vhost = url.rsplit("/", 1)[1] or "/"
    name = f"crawlfleet-dispatcher-{service}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        rows = [ln.split("\t") for ln in _ctl("list_connections", "--no-table-headers", "pid", "vhost",
                                              "client_properties").splitlines()]  # fmt: skip
        pids = [r[0] for r in rows if len(r) >= 3 and r[1] == vhost and name in r[2]]
        if pids:
            for pid in pids:
                _ctl("close_connection", pid, "test: dropping the dispatcher's connection")
            return
        time.sleep(0.2)
    raise AssertionError(f"no connection named {name} in vhost {vhost}")


def test_receives_acks_and_redelivers_unacked(rabbitmq: str) -> None:
    service = f"ps{uuid.uuid4().hex[:8]}"
    s = _session(rabbitmq, service)
    try:
        _publish(rabbitmq, service, [b'{"v":1,"n":%d}' % i for i in range(5)])
        _pump_until(s, lambda: len(s.inbox) >= 5)
        items, s.inbox = s.inbox, []
        assert [i.kind for i in items] == ["results"] * 5
        assert [i.message.body for i in items] == [b'{"v":1,"n":%d}' % i for i in range(5)]
        assert items[0].message.content_type == "application/json"
        s.ack_through(items[2].message)  # the first three are done, the last two are not
        _publish(rabbitmq, service, [b'{"v":1,"n":5}'])  # arrives in the new inbox the caller swapped in
        _pump_until(s, lambda: len(s.inbox) >= 1)
        assert [i.message.body for i in s.inbox] == [b'{"v":1,"n":5}']  # not acked either
        s.pump(0.1)
    finally:
        s.close()
    again = _session(rabbitmq, service)
    try:
        _pump_until(again, lambda: len(again.inbox) >= 3)
        time.sleep(0.3)
        again.pump(0.2)
        assert [i.message.body for i in again.inbox] == [b'{"v":1,"n":3}', b'{"v":1,"n":4}', b'{"v":1,"n":5}']
        again.ack_through(again.inbox[-1].message)
        again.inbox.clear()
        again.pump(0.1)
        assert again.ready_count(topology.results_queue(FleetSettings(), service)) == 0
    finally:
        again.close()


def test_survives_the_broker_closing_its_connection(rabbitmq: str) -> None:
    service = f"ps{uuid.uuid4().hex[:8]}"
    s = _session(rabbitmq, service)
    try:
        s.declare_fetch_queue("n1")
        _publish(rabbitmq, service, [b'{"v":1,"n":1}', b'{"v":1,"n":2}'])
        _pump_until(s, lambda: len(s.inbox) >= 2)
        first = list(s.inbox)  # delivered, not acked
        s.publish_task(BatchEncoder(scope_json=None).encode(_batch(), node="n1", incarnation="i", expires_s=None),
                       serial=42)  # buffered: never reaches the broker before the drop  # fmt: skip
        _close_my_connection(rabbitmq, service)
        _pump_until(s, lambda: s.reconnects >= 1 and len(s.inbox) >= 2)
        assert s.connected and s.paused_s > 0
        assert s.take_unconfirmed() == [42]  # the caller sends it again
        assert [i.message.body for i in s.inbox] == [i.message.body for i in first]  # redelivered
        s.ack_through(first[-1].message)  # a stale delivery tag of the dead channel: ignored, no error
        s.ack_through(s.inbox[-1].message)
        s.inbox.clear()
        _publish(rabbitmq, service, [b'{"v":1,"n":3}'])
        _pump_until(s, lambda: len(s.inbox) >= 1)
        assert s.inbox[0].message.body == b'{"v":1,"n":3}' and s.reconnects == 1
        s.ack_through(s.inbox[-1].message)
        s.inbox.clear()
        s.publish_task(BatchEncoder(scope_json=None).encode(_batch(), node="n1", incarnation="i", expires_s=None),
                       serial=43)  # fmt: skip
        _pump_until(s, lambda: s.awaiting_confirms == 0)
        assert s.take_unconfirmed() == [] and s.purge_fetch_queue("n1") == 1
    finally:
        s.close()


def _dead(url: str, token: bytes) -> list[Any]:
    out = []
    with Connection(url) as conn:
        queue = topology.dead_queue()(conn.channel())
        queue.declare()
        while (msg := queue.get(no_ack=False)) is not None:
            body = msg.body if isinstance(msg.body, bytes) else str(msg.body).encode()
            if token in body:
                out.append(msg)
            msg.ack()
    return out


def test_dead_letters_bad_messages_with_their_reason(rabbitmq: str) -> None:
    service = f"ps{uuid.uuid4().hex[:8]}"
    token = uuid.uuid4().hex.encode()
    s = _session(rabbitmq, service)
    try:
        _publish(rabbitmq, service, [b"not json " + token], submit=True, ctype="text/plain")
        _pump_until(s, lambda: len(s.inbox) >= 1)
        items, s.inbox = s.inbox, []
        with pytest.raises(BadMessage) as err:
            decode(items[0].message.body, content_type=items[0].message.content_type,
                   content_encoding=items[0].message.content_encoding, max_bytes=1 << 20)  # fmt: skip
        s.dead_letter(items[0], str(err.value))
        s.ack_through(items[-1].message)
        s.pump(0.1)
        assert s.dead_lettered == 1 and s.connected
        assert s.ready_count(topology.submit_queue(service)) == 0
    finally:
        s.close()
    dead = _dead(rabbitmq, token)
    assert len(dead) == 1
    assert "content_type" in dead[0].headers["x-crawlfleet-reason"]
    assert dead[0].headers["x-crawlfleet-source"] == f"submit:{service}"
