"""BrokerSession's deafness accounting (pipeline/transport/wire/session.py), on a fake connection with a fake clock.

The real broker is exercised by tests/faults (a stopped RabbitMQ, a stopped dispatcher); these pin the
arithmetic: which gaps become paused time and which stay silence the liveness clock must see.
"""

from __future__ import annotations

from pipeline.settings import Settings
from pipeline.transport.wire.session import BrokerSession


class Clock:
    def __init__(self) -> None:
        self.t = 10.0

    def __call__(self) -> float:
        return self.t


class FakeChannel:
    def __init__(self, conn: FakeConn) -> None:
        self.conn = conn

    def queue_declare(self, *, queue: str, passive: bool) -> tuple[str, int, int]:
        self.conn.probes += 1
        self.conn.clock.t += self.conn.broker_stall  # a stalled broker answers when it resumes
        self.conn.broker_stall = 0.0
        return queue, 0, 0

    def close(self) -> None:
        return None


class FakeConn:
    connection_errors = (ConnectionError,)

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.deliveries = 0
        self.probes = 0
        self.broker_stall = 0.0
        self.session: BrokerSession | None = None

    def drain_events(self, timeout: float) -> None:
        if self.deliveries and self.session is not None:
            self.deliveries -= 1
            self.session.inbox.append(object())  # type: ignore[arg-type]
            return
        self.clock.t += timeout
        raise TimeoutError

    def channel(self) -> FakeChannel:
        return FakeChannel(self)


def session() -> tuple[BrokerSession, FakeConn, Clock]:
    clock = Clock()
    s = BrokerSession(Settings().fleet, service="svc", heartbeat_ttl_s=1.0, stall_s=0.25, probe_after_s=0.25,
                      grace_s=0.5, monotonic=clock)  # fmt: skip
    conn = FakeConn(clock)
    conn.session = s
    s.conn = conn  # type: ignore[assignment]
    s._listened_at = s._heard_at = clock.t
    return s, conn, clock


def pump(s: BrokerSession, conn: FakeConn, *, deliver: int = 0) -> None:
    conn.deliveries = deliver
    s.pump(0.05)
    s.inbox.clear()


def test_busy_fleet_no_pause_no_probe() -> None:
    s, conn, clock = session()
    for _ in range(100):
        pump(s, conn, deliver=3)
        clock.t += 0.01  # processing between pumps
    assert s.paused_now() == 0.0 and conn.probes == 0


def test_a_stopped_dispatcher_is_paused_time() -> None:
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    clock.t += 2.5  # SIGSTOP between two pumps
    pump(s, conn, deliver=1)
    assert s.paused_now() == 2.5 + 0.5 and s.stalls == 1  # the stop, and a heartbeat period of grace


def test_note_deafness_counts_a_stop_before_the_tick() -> None:
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    clock.t += 3.0
    s.note_deafness()  # the dispatcher's tick, before the next pump
    assert s.paused_now() == 3.5
    pump(s, conn, deliver=1)
    assert s.paused_now() == 3.5  # not counted twice


def test_a_stalled_broker_is_paused_time() -> None:
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    conn.broker_stall = 3.0
    for _ in range(10):  # silence: after probe_after_s the probe blocks until the broker resumes
        pump(s, conn)
    assert conn.probes >= 1
    # the probe's 3 s, and the silence before it (the broker had stopped before anyone could tell)
    assert 3.25 + 0.5 <= s.paused_now() <= 3.4 + 0.5


def test_a_dead_fleet_on_a_live_broker_is_silence() -> None:
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    start = clock.t
    while clock.t - start < 5.0:  # nothing arrives, the broker answers every probe at once
        pump(s, conn)
    assert conn.probes > 1
    assert s.paused_now() == 0.0  # the nodes' silence counts: their batches expire


def test_disconnection_is_not_counted_twice() -> None:
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    s.lost(ConnectionError("gone"))
    clock.t += 4.0
    assert s.paused_now() == 4.0  # the outage so far
    s.note_deafness()
    assert s.paused_now() == 4.0


def test_a_stall_counts_while_it_lasts() -> None:
    """Blocked in a publish to a stalled broker: whoever reads the clock after it returns, before the
    next pump, must already see the stall (was: the dispatcher leased work on an unpaused clock)."""
    s, conn, clock = session()
    pump(s, conn, deliver=1)
    clock.t += 0.1
    assert s.paused_now() == 0.0  # ordinary work between pumps is not deafness
    clock.t += 2.9
    assert s.paused_now() == 3.0
    pump(s, conn, deliver=1)  # counted for good now, with the grace
    assert s.paused_now() == 3.0 + 0.5
