"""S1's serial-id check: before fetching a batch a node asks the dispatcher whether the batch's download
serial id is still its own ("the slave may check the id with the master").

Over RabbitMQ, without blocking the dispatcher's loop:

- The dispatcher keeps a ``SerialTable`` (serial -> the virtual fetcher it was issued to), written by
  its loop when it issues a batch and replaced from its outstanding batches on every tick (so an
  expired or completed batch leaves within a tick). A ``SerialResponder`` thread with its own
  connection answers checks from that table: it never touches the crawl core.
- A node sends ``{"serial", "fetcher"}`` to the queue ``serials.<service>`` with RabbitMQ's direct
  reply-to (``amq.rabbitmq.reply-to``: no reply queue to declare) and waits up to ``timeout_s``
  for ``{"serial", "held"}``. ``held`` false means the batch was expired or re-issued: the node hands
  its URLs back unfetched. No answer in time fails open (the batch is fetched; S1 says *may* check,
  and a dispatcher that is restarting must not stop the fleet) and the checks pause for
  ``PAUSE_AFTER_SILENCE_S`` so a fleet without a responder does not pay the timeout on every batch.

Grants end with their minute (S1 under a quota): S1 counts a grant in the minute it was made (``n``,
reset at second 1), so a batch granted late in a minute whose URLs reached the web early in the next
one would add to the next minute's quota at the server (seen: 5 requests in second 1 under a 4/s quota).
When the crawl has a quota file the dispatcher sets ``SerialTable.minute_bound``, the answers say
``"minute": true``, and the node starts no URL of a batch after ``grant_end(issued_at)`` (the end of the
minute the batch was granted in, less ``GRANT_GUARD_S`` for the request's trip to the server): those go
back unfinished and are granted again, and counted, in the new minute. ``grant_fence`` is that rule;
the node keeps the last answer's flag, so a check left unanswered still fences by the last one known.

The answer rule is pure (``answer``); the two classes are the I/O at the edges.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions

log = logging.getLogger(__name__)

REPLY_TO = "amq.rabbitmq.reply-to"
PAUSE_AFTER_SILENCE_S = 30.0
HELD, REVOKED, UNANSWERED = "held", "revoked", "unanswered"
GRANT_GUARD_S = 0.1  # a URL started this close to its grant's minute end may reach the server after it


def grant_end(issued_at: float) -> float:
    """The end of the quota minute a batch issued at ``issued_at`` (dispatcher's clock) was granted in."""
    return (int(issued_at // 60) + 1) * 60.0


def grant_fence(issued_at: float, inner: Callable[[], bool], *, wall: Callable[[], float] = time.time,
                guard_s: float = GRANT_GUARD_S) -> Callable[[], bool]:  # fmt: skip
    """``inner`` and: a URL may start only before ``grant_end(issued_at) - guard_s`` on ``wall``."""
    until = grant_end(issued_at) - guard_s
    return lambda: wall() < until and inner()


def queue_name(service: str) -> str:
    return f"serials.{service}"


class SerialTable:
    """Thread-safe serial -> fetcher map of the batches the dispatcher has out."""

    def __init__(self, *, minute_bound: bool = False) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, str] = {}
        self.minute_bound = minute_bound  # the crawl has a quota: grants end with their minute

    def issue(self, serial: int, fetcher_id: str) -> None:
        with self._lock:
            self._held[serial] = fetcher_id

    def replace(self, outstanding: Iterable[tuple[int, str]]) -> None:
        fresh = dict(outstanding)
        with self._lock:
            self._held = fresh

    def holder(self, serial: int) -> str | None:
        with self._lock:
            return self._held.get(serial)


def answer(body: bytes, holder: Callable[[int], str | None], *, minute_bound: bool = False) -> dict[str, Any]:
    """The reply to one check: held iff ``serial`` is out and issued to ``fetcher``; ``minute`` true when
    the crawl's grants end with their quota minute. Hostile input gets ``{"error": ...}`` (never an
    exception)."""
    try:
        req = json.loads(body)
        serial, fetcher = req["serial"], req["fetcher"]
        if isinstance(serial, bool) or not isinstance(serial, int) or not isinstance(fetcher, str):
            raise TypeError("serial must be an int and fetcher a string")
    except (ValueError, KeyError, TypeError) as exc:
        return {"error": f"bad serial check: {exc}"[:200]}
    out: dict[str, Any] = {"serial": serial, "held": holder(serial) == fetcher}
    if minute_bound:
        out["minute"] = True
    return out


# Checks go through a named exchange, not the default one: a node's broker user may publish to the fleet's
# exchanges only (scripts/rabbit-users.sh), never to the default exchange, which reaches every queue.
EXCHANGE = "crawlfleet.serials"


def _parameters(broker: str | pika.ConnectionParameters) -> pika.ConnectionParameters:
    """A URL (tests, benches on a loopback broker) or the fleet's parameters (``pikawire.fleet_parameters``:
    TLS, the password file), which every fleet process uses."""
    return pika.URLParameters(broker) if isinstance(broker, str) else broker


class SerialResponder:
    """The dispatcher's side: a daemon thread answering checks from ``table`` until ``stop``."""

    def __init__(self, broker: str | pika.ConnectionParameters, service: str, table: SerialTable) -> None:
        self._params = _parameters(broker)
        self._queue = queue_name(service)
        self._table = table
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="serial-responder", daemon=True)
        self.answered = 0
        self.ready = threading.Event()

    def start(self) -> SerialResponder:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn = pika.BlockingConnection(self._params)
                try:
                    self._serve(conn.channel())
                finally:
                    if conn.is_open:
                        conn.close()
            except pika.exceptions.AMQPError as exc:  # broker away: try again, the loop is not affected
                log.warning("serial-check responder: %r; reconnecting", exc)
                self._stop.wait(1.0)

    def _serve(self, ch: Any) -> None:
        # A check older than a few seconds has timed out at its node: drop it rather than answer late.
        ch.exchange_declare(EXCHANGE, "direct", durable=True)
        ch.queue_declare(self._queue, arguments={"x-message-ttl": 5000, "x-expires": 600_000})
        ch.queue_bind(self._queue, EXCHANGE, routing_key=self._queue)
        ch.basic_qos(prefetch_count=256)
        self.ready.set()
        for method, props, body in ch.consume(self._queue, inactivity_timeout=0.2):
            if self._stop.is_set():
                break
            if method is None:
                continue
            if props.reply_to:
                reply = json.dumps(
                    answer(body, self._table.holder, minute_bound=self._table.minute_bound)
                ).encode()
                self.answered += 1  # before the reply leaves: whoever reads the answer sees it counted
                ch.basic_publish(
                    "", props.reply_to, reply, pika.BasicProperties(correlation_id=props.correlation_id)
                )
            ch.basic_ack(method.delivery_tag)
        ch.cancel()


@dataclass(slots=True)
class CheckStats:
    checks: int = 0
    revoked: int = 0
    unanswered: int = 0
    skipped: int = 0
    seconds: float = 0.0  # wall time spent in answered checks


class SerialChecker:
    """The node's side. Thread-safe (one check at a time on one connection, ~1 round trip each)."""

    def __init__(self, broker: str | pika.ConnectionParameters, *, timeout_s: float = 2.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self._params = _parameters(broker)
        self.timeout_s = timeout_s
        self._mono = monotonic
        self._lock = threading.Lock()
        self._conn: Any = None
        self._ch: Any = None
        self._replies: dict[str, bytes] = {}
        self._paused_until = float("-inf")
        self.stats = CheckStats()
        self.minute_bound = False  # the last answer said grants end with their minute (kept when unanswered)

    def fence(self, issued_at: float, inner: Callable[[], bool]) -> Callable[[], bool]:
        """The fence a batch issued at ``issued_at`` runs under: ``inner``, and ``grant_fence`` when the
        dispatcher's answers say the crawl's grants end with their minute."""
        return grant_fence(issued_at, inner) if self.minute_bound else inner

    def check(self, service: str, serial: int, fetcher_id: str) -> str:
        """HELD, REVOKED or UNANSWERED (fail open: the caller fetches)."""
        with self._lock:
            if self._mono() < self._paused_until:
                self.stats.skipped += 1
                return UNANSWERED
            t0 = self._mono()
            try:
                verdict = self._ask(service, serial, fetcher_id)
            except pika.exceptions.AMQPError as exc:
                log.warning("serial check of batch %d failed: %r (fetching it anyway)", serial, exc)
                self._drop_connection()
                verdict = UNANSWERED
            if verdict == UNANSWERED:
                self.stats.unanswered += 1
                self._paused_until = self._mono() + PAUSE_AFTER_SILENCE_S
            else:
                self.stats.checks += 1
                self.stats.seconds += self._mono() - t0
                self.stats.revoked += verdict == REVOKED
                if verdict == REVOKED:
                    log.warning("batch %d is no longer %s's (expired or re-issued): handed back unfetched",
                                serial, fetcher_id)  # fmt: skip
            return verdict

    def _ask(self, service: str, serial: int, fetcher_id: str) -> str:
        if self._conn is None or not self._conn.is_open:
            self._conn = pika.BlockingConnection(self._params)
            self._ch = self._conn.channel()
            self._ch.basic_consume(REPLY_TO, self._on_reply, auto_ack=True)
        cid = uuid.uuid4().hex
        body = json.dumps({"serial": serial, "fetcher": fetcher_id}).encode()
        # Before any dispatcher declared the exchange this fails (404): unanswered, and the node fetches.
        self._ch.basic_publish(EXCHANGE, queue_name(service), body,
                               pika.BasicProperties(reply_to=REPLY_TO, correlation_id=cid))  # fmt: skip
        deadline = self._mono() + self.timeout_s
        while cid not in self._replies:
            left = deadline - self._mono()
            if left <= 0:
                return UNANSWERED
            self._conn.process_data_events(time_limit=min(left, 0.05))
        reply = json.loads(self._replies.pop(cid))
        self.minute_bound = reply.get("minute") is True
        return HELD if reply.get("held") is True else REVOKED

    def _on_reply(self, _ch: Any, _method: Any, props: Any, body: bytes) -> None:
        if props.correlation_id:
            self._replies[props.correlation_id] = body
            if len(self._replies) > 1024:  # late answers to checks that timed out
                self._replies.clear()

    def _drop_connection(self) -> None:
        try:
            if self._conn is not None and self._conn.is_open:
                self._conn.close()
        except pika.exceptions.AMQPError:
            pass
        self._conn = self._ch = None

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
