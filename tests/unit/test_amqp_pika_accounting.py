"""PikaSession's deafness accounting is BrokerSession's (tests/unit/test_transport_session_deafness.py),
on a fake pika loop with a fake clock; and the pika read size it relies on is still where it sets it.

The real broker is exercised by tests/integration/test_amqp_pika_session.py."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from pika.adapters.utils.io_services_utils import _AsyncTransportBase

from fetchers.records import Batch, UrlTask
from pipeline.settings import Settings
from pipeline.transport.wire import pika_session, pikawire
from pipeline.transport.wire.batchsend import BatchEncoder
from pipeline.transport.wire.pika_session import PikaSession, make_session, send_task, take_unconfirmed
from pipeline.transport.wire.session import BrokerSession


class Clock:
    def __init__(self) -> None:
        self.t = 10.0

    def __call__(self) -> float:
        return self.t


class FakeChannel:
    def __init__(self, conn: FakeConn) -> None:
        self.conn = conn
        self.is_open, self.is_closed = True, False

    def queue_declare(self, name: str, *, passive: bool, callback: Callable[[Any], None]) -> None:
        self.conn.probes += 1
        self.conn.clock.t += self.conn.broker_stall  # a stalled broker answers when it resumes
        self.conn.broker_stall = 0.0
        callback(SimpleNamespace(method=SimpleNamespace(message_count=0)))

    def close(self) -> None:
        self.is_open, self.is_closed = False, True


class FakeLoop:
    """pika's IOLoop as ``_poll`` drives it: a timer bounds the wait, poll delivers or lets time pass."""

    def __init__(self, conn: FakeConn) -> None:
        self.conn = conn
        self.timers: list[float] = []

    def call_later(self, delay: float, _fn: Callable[[], None]) -> float:
        self.timers.append(delay)
        return delay

    def remove_timeout(self, handle: float) -> None:
        self.timers.remove(handle)

    def poll(self) -> None:
        conn = self.conn
        if conn.deliveries and conn.session is not None:
            conn.deliveries -= 1
            conn.session.inbox.append(object())  # type: ignore[arg-type]
            return
        conn.clock.t += min(self.timers)  # nothing arrives: the wait runs out

    def process_timeouts(self) -> None:
        return None


class FakeConn:
    is_closed = False

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.deliveries = 0
        self.probes = 0
        self.broker_stall = 0.0
        self.session: PikaSession | None = None
        self.ioloop = FakeLoop(self)

    def channel(self, *, on_open_callback: Callable[[Any], None]) -> None:
        on_open_callback(FakeChannel(self))


def session() -> tuple[PikaSession, FakeConn, Clock]:
    clock = Clock()
    s = PikaSession(Settings().fleet, service="svc", heartbeat_ttl_s=1.0, stall_s=0.25, probe_after_s=0.25,
                    grace_s=0.5, monotonic=clock)  # fmt: skip
    conn = FakeConn(clock)
    conn.session = s
    s.conn = conn
    s._listened_at = s._heard_at = clock.t
    return s, conn, clock


def pump(s: PikaSession, conn: FakeConn, *, deliver: int = 0) -> None:
    conn.deliveries = deliver
    s.pump(0.05)
    s.inbox.clear()


def test_busy_fleet_no_pause_no_probe() -> None:
    s, conn, clock = session()
    for _ in range(100):
        pump(s, conn, deliver=3)
        clock.t += 0.01
    assert s.paused_now() == 0.0 and conn.probes == 0


def test_a_stopped_dispatcher_is_paused_time() -> None:
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    clock.t += 2.5
    pump(s, conn, deliver=1)
    assert s.paused_now() == 2.5 + 0.5 and s.stalls == 1


def test_a_stalled_broker_is_paused_time() -> None:
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    conn.broker_stall = 3.0
    for _ in range(10):
        pump(s, conn)
    assert conn.probes >= 1
    assert 3.25 + 0.5 <= s.paused_now() <= 3.4 + 0.5


def test_a_dead_fleet_on_a_live_broker_is_silence() -> None:
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    start = clock.t
    while clock.t - start < 5.0:
        pump(s, conn)
    assert conn.probes > 1 and s.paused_now() == 0.0


def test_disconnection_is_not_counted_twice() -> None:
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    s.lost(ConnectionError("gone"))
    assert not s.connected
    clock.t += 4.0
    assert s.paused_now() == 4.0
    s.note_deafness()
    assert s.paused_now() == 4.0


def test_pika_reads_large_chunks() -> None:
    assert _AsyncTransportBase._MAX_RECV_BYTES >= pikawire.RECV_BYTES


def test_the_seam_picks_the_client_and_refuses_to_send_while_down() -> None:
    fleet = Settings().fleet
    kw: dict[str, Any] = {"service": "svc", "heartbeat_ttl_s": 1.0}
    assert type(make_session("pika", fleet, **kw)) is PikaSession
    assert type(make_session("kombu", fleet, **kw)) is BrokerSession
    with pytest.raises(ValueError, match="amqp_client"):
        make_session("librabbitmq", fleet, **kw)
    msg = BatchEncoder(scope_json=None).encode(Batch(1, "n#0", [UrlTask("http://a.test/", 1)]), node="n",
                                               incarnation=None, expires_s=None)  # fmt: skip
    for client in pika_session.CLIENTS:
        s = make_session(client, fleet, **kw)  # never connected
        with pytest.raises(ConnectionError):
            send_task(s, msg, serial=1)
        assert take_unconfirmed(s) == []
