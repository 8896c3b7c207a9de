"""One URL's paced exchange and its retries, for the fetch engine (``fetchers.engine``).

Each request waits for the host's pacer grant; retryable transport errors and 5xx answers (not 501) are
asked again with exponential back-off up to ``fetch.retries`` times; a 429 (or a 503 with Retry-After)
defers the host for the time it asks (``DEFAULT_THROTTLE_S`` without one) and is retried after it when
the wait is within the pacer's limit, else recorded as ``THROTTLED``. The batch's ``fence`` is checked
before every request (and by the transport once a new connection is up: ``fetchers.exchange.SEND_FENCE``):
a fenced URL never asked is handed back (``LEASE_LAPSED``); one fenced between its
retries keeps the HTTP answer it got as its outcome (retry budget cut short), or the next holder would ask
it the whole budget again. The host's gap restarts when the request goes out (``Pacer.restart``, from the
transport: ``fetchers.exchange.SENT``, and once a new connection is up): the next request keeps the delay
from this one's send, not from its grant, and the start recorded in ``sent`` is the send.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from fetchers.exchange import SEND_FENCE, SENT, Exchange, Transport, hand_over
from fetchers.politeness import Deferred, Grant, Pacer, parse_retry_after
from fetchers.report import DEFERRED, LEASE_LAPSED, THROTTLED
from fetchers.robotsnote import MAX_SENT
from fetchers.wire import Archive

DEFAULT_THROTTLE_S = 60.0  # a 429 without Retry-After keeps the host away this long (capped by settings)


async def paced_exchange(
    transport: Transport, pacer: Pacer, url: str, host: str, ip: str, max_body: int, *, retries: int,
    backoff_s: float, archive: Archive | None = None, fence: Callable[[], bool] | None = None,
    sent: list[tuple[float, int]] | None = None,
) -> Exchange:
    """See the module; ``sent`` gets (wall time started, status) of each request made."""  # fmt: skip
    attempt = 0
    last: Exchange | None = None  # the HTTP answer a retry would replace
    while True:
        try:
            grant = await pacer.acquire(host, ip)
        except Deferred as d:
            return Exchange(error_class=DEFERRED, error_message=str(d))
        if fence is not None and not fence():  # the pacer may have held us across a stop
            pacer.release(grant)
            if last is not None:
                return last
            return Exchange(error_class=LEASE_LAPSED, error_message="not sent: the batch's lease may have lapsed")
        started = [time.time()]  # the send, once the transport says it went (SENT)
        token = SEND_FENCE.set(_at_send(fence, pacer, grant))
        went = SENT.set(_on_sent(pacer, grant, started))
        try:
            ex = await transport.exchange(url, host, ip, max_body=max_body)
        finally:
            SENT.reset(went)
            SEND_FENCE.reset(token)
            pacer.release(grant)
        if ex.error_class == LEASE_LAPSED:  # fenced once connected: nothing was sent
            return last if last is not None else ex
        if sent is not None and len(sent) < MAX_SENT:
            sent.append((started[0], ex.status))
        if ex.wire is not None and archive is not None:
            hand_over(ex, archive)
        status = ex.status
        if status == 429 or (status == 503 and "retry-after" in ex.headers):
            raw = ex.headers.get("retry-after", "")
            wait = parse_retry_after(raw, now=time.time()) if raw else None
            wait = DEFAULT_THROTTLE_S if wait is None else wait
            pacer.defer(host, wait)
            if wait <= pacer.max_wait_s and attempt < retries:
                attempt += 1
                continue  # acquire() sleeps until the host's Retry-After has passed
            ex.error_class = THROTTLED
            ex.error_message = f"{status} with Retry-After {raw or 'absent'}; host deferred {wait:.0f}s"
            return ex
        retry = ex.retryable if ex.error_class else (status >= 500 and status != 501)
        if not retry or attempt >= retries:
            return ex
        last = ex if not ex.error_class else None  # an HTTP answer (a transport error is handed back)
        await asyncio.sleep(backoff_s * (2**attempt))
        attempt += 1


def _at_send(fence: Callable[[], bool] | None, pacer: Pacer, grant: Grant) -> Callable[[], bool]:
    """What a transport asks once a new connection is up, just before it sends: the batch's fence, and, when
    the request goes out, the host's gap restarted from now (a slow connect must not shorten the gap the
    server sees to the next request)."""

    def ask() -> bool:
        if fence is not None and not fence():
            return False
        pacer.restart(grant)
        return True

    return ask


def _on_sent(pacer: Pacer, grant: Grant, started: list[float]) -> Callable[[], None]:
    """What a transport calls as the request goes out: the host's gap restarted from now, and the
    request's recorded start moved to it."""

    def went() -> None:
        pacer.restart(grant)
        started[0] = time.time()

    return went
