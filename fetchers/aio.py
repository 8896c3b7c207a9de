"""The event-driven fetcher (S1): one aiohttp ClientSession and TCPConnector per process, many sockets
on one loop. ``AioFetcher`` is what the embedded engine and the Celery worker use.

The connector resolves through ``GuardedResolver`` so that only SSRF-checked addresses are connected
to, and asks the batch's fence (``fetchers.exchange.SEND_FENCE``) again once a new connection is up, before
aiohttp writes the request: a fenced exchange gives the connection back to the pool unused and ends as
``LEASE_LAPSED``. Bodies are read raw (``auto_decompress=False``) and decoded by ``BodyDecoder`` under a cap. All
rules (robots, redirects, retries, pacing) live in ``fetchers.engine``, shared with the threaded fetcher.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import time
from collections.abc import Callable
from typing import Any, cast

import aiohttp
from aiohttp.abc import AbstractResolver
from aiohttp.client_proto import ResponseHandler
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.http_writer import _serialize_headers
from yarl import URL

from fetchers.body import ACCEPT_ENCODING, BodyDecoder
from fetchers.conditional import REQUEST_HEADERS
from fetchers.exchange import REDIRECT_STATUSES, SEND_FENCE, SENT, Exchange, dns_error_class
from fetchers.fetcher import EngineFetcher
from fetchers.guard import GuardedResolver, SsrfBlocked
from fetchers.report import LEASE_LAPSED
from fetchers.tls import cert_error_class, client_context
from fetchers.wire import WireRecord, status_line
from pipeline.settings import FetchSettings

# Response headers kept in FetchResult.headers (lower-case names).
KEEP_HEADERS = (
    "content-type", "content-length", "content-encoding", "content-language", "last-modified", "etag",
    "location", "retry-after", "x-robots-tag", "cache-control", "expires", "date", "server",
)  # fmt: skip
_REDIRECT_BODY_CAP = 64 * 1024  # read (and drop) small redirect bodies so the connection can be reused
_READ_CHUNK = 64 * 1024

# Time spent creating a new connection for the current exchange (set per task; see _TimedConnector); -1.0
# while the exchange has made no new connection.
_CONNECT_TIME: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("connect_time", default=None)


class _Fenced(Exception):
    """The batch's fence said no once a new connection was up: the request was not sent."""


class MalformedBody(aiohttp.ClientPayloadError):
    """The body's framing did not parse (an invalid chunk size after a good response head)."""


class _BodyErrorHandler(ResponseHandler):
    """Hands a body parse error to the open body reader.

    aiohttp's C parser (3.14) drops the open body's StreamReader when the body fails to parse after a
    good head, so the error reaches only the message queue and a reader of that body waits out the
    whole total timeout: the fetch was recorded as a "timeout" after total_timeout_s, or as
    "bad_response" when head and bad chunk arrived in one segment. The pure-Python parser already
    does this; with it both arrivals end as the same immediate "bad_response"."""

    def set_exception(self, exc: BaseException, *args: Any, **kwargs: Any) -> None:
        payload = getattr(self, "_payload", None)
        if isinstance(exc, HttpProcessingError) and payload is not None and not payload.is_eof():
            first_line = str(exc.message).partition("\n")[0]
            err = MalformedBody(f"malformed body: {first_line}")
            err.__cause__ = exc
            payload.set_exception(err)
        super().set_exception(exc, *args, **kwargs)


class _TimedConnector(aiohttp.TCPConnector):
    """Records connection set-up time into the running exchange's holder; cheaper than TraceConfig,
    which adds signal dispatch to every request and every body chunk. Its connections use
    ``_BodyErrorHandler``.

    ``connect`` is where aiohttp hands a connection to the request, which writes its head on it next: a
    new connection is fenced there. (A TraceConfig ``on_connection_create_end`` handler runs earlier,
    inside the connector's own bookkeeping, where raising would leave the new socket neither pooled nor
    closed.) A fenced connection is released to the pool, fresh and reusable, and ``_Fenced`` raised."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._factory = cast("functools.partial[ResponseHandler]", functools.partial(_BodyErrorHandler, loop=self._loop))

    async def _create_connection(self, req: Any, traces: Any, timeout: Any) -> Any:
        t0 = time.perf_counter()
        proto = await super()._create_connection(req, traces, timeout)
        holder = _CONNECT_TIME.get()
        if holder is not None:
            holder[0] = time.perf_counter() - t0
        return proto

    async def connect(self, req: Any, traces: Any, timeout: Any) -> aiohttp.connector.Connection:
        conn = await super().connect(req, traces, timeout)
        holder = _CONNECT_TIME.get()
        if holder is not None and holder[0] >= 0.0:  # a new connection (a pooled one was fenced before)
            fence = SEND_FENCE.get()
            if fence is not None and not fence():  # stopped while connecting: send nothing now
                conn.release()
                raise _Fenced("not sent: the batch's lease lapsed while connecting")
        went = SENT.get()  # the request is written on it next
        if went is not None:
            went()
        return conn


def classify(exc: BaseException, *, got_response: bool) -> tuple[str, bool]:
    """(error_class, retryable) for an exception raised by aiohttp during one exchange."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        os_error = exc.os_error
        if isinstance(os_error, SsrfBlocked):
            return "ssrf_blocked", False
        return dns_error_class(os_error), False
    if isinstance(exc, aiohttp.ClientSSLError):  # a certificate failure is a class of its own (fetchers.tls)
        return cert_error_class(exc) or "tls_error", False
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect_error", True
    if isinstance(exc, asyncio.TimeoutError):  # includes aiohttp.ServerTimeoutError
        return "timeout", not got_response
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        # aiohttp already retried once on a fresh connection if a reused keep-alive one was closed under
        # it; a server that hangs up on a new connection too is not worth a third visible request.
        return "server_disconnected", False
    if isinstance(exc, MalformedBody):
        return "bad_response", False
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "incomplete_body", False
    if isinstance(exc, aiohttp.ClientResponseError):  # the response head did not parse
        text = f"{exc.message} {exc.__cause__!r}".lower()
        if "status" in text:
            return "bad_status_line", False
        if "too long" in text or "got more than" in text or "too many headers" in text:
            return "headers_too_large", False
        return "bad_response", False
    if isinstance(exc, aiohttp.InvalidURL | ValueError):
        return "invalid_url", False
    if isinstance(exc, aiohttp.ClientOSError | OSError):
        return "connect_error", not got_response
    if isinstance(exc, aiohttp.ClientError):
        return "http_error", False
    return "internal_error", False


class AioTransport:
    """One HTTP exchange on the shared session; implements ``fetchers.engine.Transport``."""

    def __init__(
        self, session: aiohttp.ClientSession, fetch: FetchSettings, clock: Callable[[], float], *, capture: bool = False
    ) -> None:
        self._session = session
        self._clock = clock
        self.capture = capture  # fill Exchange.wire (fetchers.wire) for an archive
        self._max_head = fetch.max_header_bytes
        self._timeout = aiohttp.ClientTimeout(
            total=fetch.total_timeout_s,
            connect=fetch.connect_timeout_s,
            sock_connect=fetch.connect_timeout_s,
            sock_read=fetch.read_timeout_s,
        )

    async def exchange(self, url: str, host: str, ip: str, *, max_body: int) -> Exchange:
        ex = Exchange()
        holder = [-1.0]
        _CONNECT_TIME.set(holder)
        t0 = self._clock()
        sent_at = time.time() if self.capture else 0.0
        got_response = False
        try:
            async with self._session.get(
                URL(url, encoded=True), allow_redirects=False, timeout=self._timeout, headers=REQUEST_HEADERS.get()
            ) as resp:
                got_response = True
                ex.ttfb_s = self._clock() - t0
                ex.status = status = resp.status
                h = resp.headers
                ex.headers = {k: h[k] for k in KEEP_HEADERS if k in h}
                if "x-robots-tag" in ex.headers:  # may repeat; each header is its own scope
                    ex.headers["x-robots-tag"] = "\n".join(h.getall("x-robots-tag"))
                if self.capture:
                    ex.wire = wire = _wire_of(resp, url, ip, sent_at)
                head_size = sum(len(k) + len(v) + 4 for k, v in resp.raw_headers)
                if head_size > self._max_head:
                    resp.close()
                    ex.error_class = "headers_too_large"
                    ex.error_message = f"{head_size} bytes of response headers (max {self._max_head})"
                    if ex.wire is not None:
                        wire.truncated = "length"
                    return ex
                ctype = ex.headers.get("content-type", "")
                ex.content_type = ctype.partition(";")[0].strip().lower()
                ex.ip = ip  # the connector resolves through the same guarded resolver: same answer
                conn = resp.connection
                if conn is not None and conn.transport is not None:  # the actual peer, when still attached
                    peer = conn.transport.get_extra_info("peername")
                    if peer:
                        ex.ip = peer[0]
                limit = _REDIRECT_BODY_CAP if status in REDIRECT_STATUSES else max_body
                decoder = BodyDecoder(ex.headers.get("content-encoding", ""), limit, keep_raw=self.capture)
                whole = False
                try:
                    content = resp.content
                    while True:
                        chunk = await content.readany()
                        if not chunk:
                            whole = True
                            break
                        if not decoder.feed(chunk):
                            resp.close()  # capped or undecodable: drop the rest with the connection
                            break
                finally:
                    ex.body = decoder.body
                    ex.wire_bytes = decoder.wire
                    ex.truncated = decoder.truncated
                    if ex.wire is not None:
                        wire.payload = decoder.raw
                        if not whole:
                            wire.truncated = "length" if decoder.truncated else "disconnect"
                if decoder.error:
                    ex.error_class, ex.error_message = "decode_error", decoder.error
        except asyncio.CancelledError:
            raise
        except _Fenced as exc:
            ex.error_class, ex.error_message = LEASE_LAPSED, str(exc)
        except Exception as exc:  # every failure is a result, never an exception
            if ex.wire is not None and isinstance(exc, asyncio.TimeoutError):
                ex.wire.truncated = "time"
            ex.error_class, ex.retryable = classify(exc, got_response=got_response)
            ex.error_message = (f"{type(exc).__name__}: {exc}")[:300]
        ex.connect_s = max(0.0, holder[0])
        return ex


def _wire_of(resp: aiohttp.ClientResponse, url: str, ip: str, sent_at: float) -> WireRecord:
    """The exchange's heads for an archive. The request head is rebuilt with aiohttp's own serializer
    from the request's headers (a live view of those it wrote) and request line; aiohttp sends origin-form
    targets and HTTP/1.1 (no proxy here), so these are the bytes that went out."""
    info = resp.request_info
    line = f"{info.method} {info.url.raw_path_qs} HTTP/1.1"
    request = _serialize_headers(line, info.headers)  # type: ignore[arg-type]
    version = resp.version or aiohttp.HttpVersion11
    head = status_line((version.major, version.minor), resp.status, resp.reason or "")
    return WireRecord(url, ip, sent_at, request, head, tuple(resp.raw_headers))


class AioFetcher(EngineFetcher):
    """The event-driven fetcher: one ClientSession over one connector per process (``EngineFetcher``
    says the rest). The connector resolves through the SSRF guard and closes it; a resolver passed in
    stays open (``_NonClosingGuard``)."""

    _session: aiohttp.ClientSession | None = None

    def _guard(self, inner: AbstractResolver) -> GuardedResolver:
        return _NonClosingGuard(inner, self.settings.security.allow_networks)

    def _open_transport(self, guarded: GuardedResolver) -> AioTransport:
        f = self.settings.fetch
        connector = _TimedConnector(
            limit=f.concurrency + 16,  # the pacer bounds in-flight requests; leave headroom for closing sockets
            limit_per_host=0,
            resolver=guarded,
            use_dns_cache=self._given_resolver is None,  # our DNS layer caches with real TTLs
            ttl_dns_cache=30,
            keepalive_timeout=15.0,
            ssl=client_context(f),
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers={"User-Agent": f.agent_for(os.getpid()), "Accept-Encoding": ACCEPT_ENCODING, "Accept": "*/*"},
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            raise_for_status=False,
            requote_redirect_url=False,
            max_line_size=f.max_header_bytes,
            max_field_size=f.max_header_bytes,
            read_bufsize=_READ_CHUNK,
        )
        return AioTransport(self._session, f, self.clock, capture=self.archive is not None)

    async def _close_transport(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _NonClosingGuard(GuardedResolver):
    """The connector closes its resolver; the inner one belongs to whoever passed it in."""

    async def close(self) -> None:
        return None
