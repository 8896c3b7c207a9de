"""The thread-pool baseline (one thread per download, as S1 argues against): requests-futures.

Same interface and same result records as ``AioFetcher``; the shared ``fetchers.engine`` runs the rules
(robots, redirects, retries, pacing) on the event loop and hands each single exchange to a worker thread,
where requests does the blocking I/O and the body is read raw and decoded under the same caps.

SSRF pinning: the engine resolves and checks every host through ``GuardedResolver`` before an exchange
and records the checked address in ``pins``; the urllib3 connection class connects only to that pinned
address (never resolving again), so there is no rebinding window here either.

The batch's fence (``fetchers.exchange.SEND_FENCE``) reaches the worker thread with the exchange's context
(``_ContextPool``, as ``asyncio.to_thread`` does; the fences are thread-safe). The pool connects a new
connection in ``_validate_conn`` (urllib3's hook "right before a request is made"; it connects HTTPS there
itself) and asks the fence before the request head is written: fenced, nothing is sent and the exchange
ends as ``LEASE_LAPSED``. urllib3's ``urlopen`` closes a connection whose request raised and offers no
way to give it back unused, so that fresh connection is closed (a FIN, no request bytes), not reused.
"""

from __future__ import annotations

import asyncio
import contextvars
import http.client
import os
import socket
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from http.cookiejar import DefaultCookiePolicy
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests_futures.sessions import FuturesSession
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, InvalidChunkLength, NewConnectionError

from fetchers.aio import KEEP_HEADERS
from fetchers.body import ACCEPT_ENCODING, BodyDecoder
from fetchers.conditional import REQUEST_HEADERS
from fetchers.exchange import REDIRECT_STATUSES, SEND_FENCE, SENT, Exchange, split_host
from fetchers.fetcher import EngineFetcher
from fetchers.guard import GuardedResolver, SsrfBlocked
from fetchers.report import LEASE_LAPSED
from fetchers.tls import cert_error_class, client_context
from fetchers.wire import WireRecord, status_line
from pipeline.settings import FetchSettings, Settings

_REDIRECT_BODY_CAP = 64 * 1024
_READ_CHUNK = 64 * 1024

Pins = dict[tuple[str, int], str]


def _pinned_classes(pins: Pins, *, capture: bool = False) -> dict[str, type[HTTPConnectionPool]]:
    """Pool classes whose connections connect to ``pins[(host, port)]`` and nowhere else. With
    ``capture``, a connection keeps the bytes of its current request head as sent (``_wire_sent``)."""

    def new_conn(self: HTTPConnection) -> socket.socket:
        ip = pins.get((self.host, self.port))
        if ip is None:
            raise NewConnectionError(self, f"ssrf guard: no checked address for {self.host}")
        try:
            return urllib3.util.connection.create_connection(
                (ip, self.port), self.timeout, source_address=self.source_address, socket_options=self.socket_options
            )
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"connect to {self.host} ({ip}) timed out") from exc
        except OSError as exc:
            raise NewConnectionError(self, f"failed to connect to {self.host} ({ip}): {exc}") from exc

    methods: dict[str, Any] = {"_new_conn": new_conn}
    if capture:
        methods.update(_capturing_methods())
    conn = type("PinnedHTTPConnection", (HTTPConnection,), methods)
    sconn = type("PinnedHTTPSConnection", (HTTPSConnection,), methods)
    pool = type("PinnedHTTPConnectionPool", (HTTPConnectionPool,),
                {"ConnectionCls": conn, "_validate_conn": _fenced_validate(HTTPConnectionPool)})  # fmt: skip
    spool = type("PinnedHTTPSConnectionPool", (HTTPSConnectionPool,),
                 {"ConnectionCls": sconn, "_validate_conn": _fenced_validate(HTTPSConnectionPool)})  # fmt: skip
    return {"http": pool, "https": spool}


class _Fenced(Exception):
    """The batch's fence said no once a new connection was up: the request was not sent."""


def _fenced_validate(base: type[HTTPConnectionPool]) -> Callable[[HTTPConnectionPool, Any], None]:
    """``_validate_conn`` that connects a new connection (the HTTPS pool's own does), then asks the fence."""

    def validate(self: HTTPConnectionPool, conn: Any) -> None:
        new = conn.is_closed
        base._validate_conn(self, conn)
        if new and conn.is_closed:
            conn.connect()  # http.client would connect when the head is written, after any check of ours
        fence = SEND_FENCE.get()
        if new and fence is not None and not fence():  # stopped while connecting: send nothing now
            conn.close()
            raise _Fenced("not sent: the batch's lease lapsed while connecting")
        went = SENT.get()  # the request is written on it next
        if went is not None:
            went()

    return validate


class _ContextPool(ThreadPoolExecutor):
    """Runs each job in a copy of the submitting task's context, so ``SEND_FENCE`` is seen on the thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)


def _capturing_methods() -> dict[str, Any]:
    """http.client writes a request head through ``send`` after ``putrequest`` starts it (urllib3 2
    included): what passes through ``send`` is what went to the socket."""

    def putrequest(self: HTTPConnection, *args: Any, **kwargs: Any) -> None:
        self._wire_sent = []  # type: ignore[attr-defined]
        self._wire_at = time.time()  # type: ignore[attr-defined]  # WARC-Date: when the request went out
        HTTPConnection.putrequest(self, *args, **kwargs)

    def send(self: HTTPConnection, data: Any) -> None:
        if isinstance(data, bytes | bytearray):
            self._wire_sent.append(bytes(data))  # type: ignore[attr-defined]
        http.client.HTTPConnection.send(self, data)

    return {"putrequest": putrequest, "send": send}


class _PinnedAdapter(HTTPAdapter):
    def __init__(self, pins: Pins, *, fetch: FetchSettings, capture: bool = False, **kw: Any) -> None:
        self._pins = pins
        self._capture = capture
        self._ssl = client_context(fetch)  # the aio fetcher's policy: fetch.tls_verify, fetch.tls_ca_bundle
        super().__init__(**kw)

    def init_poolmanager(self, *args: Any, **kw: Any) -> None:
        kw["ssl_context"] = self._ssl
        super().init_poolmanager(*args, **kw)
        self.poolmanager.pool_classes_by_scheme = _pinned_classes(self._pins, capture=self._capture)


class _HeadersTooLarge(Exception):
    pass


class _BodyFailed(Exception):
    """A failure after the response head arrived (not retryable)."""

    def __init__(self, exc: BaseException, resp: requests.Response) -> None:
        super().__init__(str(exc))
        self.exc = exc
        self.resp = resp


def classify(exc: BaseException, *, got_response: bool) -> tuple[str, bool]:
    """(error_class, retryable) for an exception from requests/urllib3 during one exchange."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(chain) < 10:
        chain.append(e)
        nxt = getattr(e, "reason", None)
        e = nxt if isinstance(nxt, BaseException) else (e.__cause__ or e.__context__)
    for c in chain:
        if isinstance(c, SsrfBlocked) or "ssrf guard" in str(c):
            return "ssrf_blocked", False
    if cert := cert_error_class(exc):
        return cert, False
    if isinstance(exc, requests.exceptions.SSLError):
        return "tls_error", False
    text = " ".join(f"{type(c).__name__} {c}" for c in chain).lower()
    if any(isinstance(c, http.client.LineTooLong | _HeadersTooLarge) for c in chain) or "got more than" in text:
        return "headers_too_large", False
    if any(isinstance(c, http.client.BadStatusLine) for c in chain) and "remotedisconnected" not in text:
        return "bad_status_line", False
    if isinstance(exc, requests.exceptions.ConnectTimeout) or "connecttimeout" in text:
        return "timeout", True
    if isinstance(exc, requests.exceptions.Timeout) or any(isinstance(c, TimeoutError) for c in chain):
        return "timeout", not got_response
    # A chunk-size line that is not hex (urllib3 or http.client wording); an empty one is a cut-off body.
    if "with base 16" in text or any(isinstance(c, InvalidChunkLength) and c.length.strip() for c in chain):
        return "bad_response", False
    if isinstance(exc, requests.exceptions.ChunkedEncodingError) or "incompleteread" in text:
        return "incomplete_body", False
    if "remotedisconnected" in text or "connection aborted" in text:
        return "server_disconnected", not got_response
    if isinstance(exc, requests.exceptions.InvalidURL | requests.exceptions.MissingSchema):
        return "invalid_url", False
    if isinstance(exc, requests.exceptions.ConnectionError | OSError):
        return "connect_error", not got_response
    return "http_error", False


class ThreadedTransport:
    """One exchange on a worker thread of a FuturesSession; implements ``fetchers.engine.Transport``."""

    def __init__(
        self, fetch: FetchSettings, *, threads: int, clock: Callable[[], float], capture: bool = False
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self.capture = capture  # fill Exchange.wire (fetchers.wire) for an archive
        self.pins: Pins = {}
        self.session = FuturesSession(executor=_ContextPool(max_workers=threads))
        adapter = _PinnedAdapter(
            self.pins, fetch=fetch, capture=capture, pool_connections=1024, pool_maxsize=threads, max_retries=0
        )
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.trust_env = False
        self.session.verify = fetch.tls_verify  # the CAs are the adapter's context's (system + tls_ca_bundle)
        if not fetch.tls_verify:  # chosen in the settings: not worth a warning per request
            warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
        self.session.headers.clear()
        self.session.headers.update(
            {"User-Agent": fetch.agent_for(os.getpid()), "Accept-Encoding": ACCEPT_ENCODING, "Accept": "*/*"}
        )
        self.session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))  # accept no cookies
        self._timeout = (fetch.connect_timeout_s, fetch.read_timeout_s)

    def _read(self, max_body: int, deadline: float) -> Callable[..., requests.Response]:
        """A response hook (runs on the worker thread): read the raw body under the caps."""

        def hook(resp: requests.Response, *args: Any, **kwargs: Any) -> requests.Response:
            limit = _REDIRECT_BODY_CAP if resp.status_code in REDIRECT_STATUSES else max_body
            dec = BodyDecoder(resp.headers.get("Content-Encoding", ""), limit, keep_raw=self.capture)
            resp.decoder = dec  # type: ignore[attr-defined]
            if self.capture:
                resp.wire_heads = _heads_of(resp)  # type: ignore[attr-defined]
            head_size = sum(len(k) + len(v) + 4 for k, v in resp.raw.headers.items())
            if head_size > self._fetch.max_header_bytes:
                resp.close()
                raise _BodyFailed(_HeadersTooLarge(f"{head_size} bytes of response headers"), resp)
            try:
                read1 = resp.raw.read1  # returns what has arrived, so the deadline is checked per packet
                while chunk := read1(_READ_CHUNK, decode_content=False):
                    if not dec.feed(chunk):
                        resp.close()
                        break
                    if time.monotonic() > deadline:
                        resp.close()
                        raise TimeoutError(f"total timeout {self._fetch.total_timeout_s}s reading the body")
            except Exception as exc:
                raise _BodyFailed(exc, resp) from exc
            return resp

        return hook

    async def exchange(self, url: str, host: str, ip: str, *, max_body: int) -> Exchange:
        ex = Exchange(ip=ip)
        sent_at = time.time()
        name, port = split_host(host)
        if url.startswith("https://") and not host.endswith(f":{port}"):
            port = 443
        if len(self.pins) > 100_000:  # bounded: hosts of past batches are re-pinned when seen again
            self.pins.clear()
        self.pins[(name, port)] = ip
        deadline = time.monotonic() + self._fetch.total_timeout_s
        try:
            fut = self.session.get(
                url, stream=True, allow_redirects=False, timeout=self._timeout, headers=REQUEST_HEADERS.get(),
                hooks={"response": self._read(max_body, deadline)},
            )  # fmt: skip
            resp = await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            raise
        except _Fenced as fenced:
            ex.error_class, ex.error_message = LEASE_LAPSED, str(fenced)
            return ex
        except _BodyFailed as failed:
            ex.error_class, ex.retryable = classify(failed.exc, got_response=True)
            ex.error_message = f"{type(failed.exc).__name__}: {failed.exc}"[:300]
            ex.status = failed.resp.status_code
            partial: BodyDecoder | None = getattr(failed.resp, "decoder", None)
            if partial is not None and ex.error_class != "headers_too_large":
                ex.body, ex.wire_bytes = partial.body, partial.wire
            if partial is not None:
                reason = "time" if ex.error_class == "timeout" else "length" if partial.truncated else "disconnect"
                ex.wire = _wire(failed.resp, url, ip, sent_at, partial, truncated=reason)
            return ex
        except Exception as exc:
            ex.error_class, ex.retryable = classify(exc, got_response=False)
            ex.error_message = f"{type(exc).__name__}: {exc}"[:300]
            return ex
        ex.ttfb_s = resp.elapsed.total_seconds()
        ex.status = resp.status_code
        h = resp.headers
        ex.headers = {k: h[k] for k in KEEP_HEADERS if k in h}
        ex.content_type = ex.headers.get("content-type", "").partition(";")[0].strip().lower()
        dec: BodyDecoder = resp.decoder  # type: ignore[attr-defined]
        ex.body, ex.wire_bytes, ex.truncated = dec.body, dec.wire, dec.truncated
        ex.wire = _wire(resp, url, ip, sent_at, dec, truncated="length" if dec.truncated else "")
        if dec.error:
            ex.error_class, ex.error_message = "decode_error", dec.error
        return ex

    def close(self) -> None:
        self.session.close()
        self.session.executor.shutdown(wait=False, cancel_futures=True)


def _heads_of(resp: requests.Response) -> tuple[bytes, bytes, tuple[tuple[bytes, bytes], ...], float]:
    """(request head as sent, response status line, response header lines as received, when the request
    went out); on the worker thread, before the body is read (the connection is still the response's)."""
    conn = getattr(resp.raw, "connection", None)
    sent = b"".join(getattr(conn, "_wire_sent", ()))
    sent_at = float(getattr(conn, "_wire_at", 0.0))
    orig = getattr(resp.raw, "_original_response", None)
    version = getattr(orig, "version", 11)
    line = status_line(divmod(version, 10), resp.status_code, resp.reason or "")
    raw = orig.msg._headers if orig is not None else list(resp.raw.headers.items())
    headers = tuple((k.encode("latin-1", "replace"), v.encode("latin-1", "replace")) for k, v in raw)
    return sent, line, headers, sent_at


def _wire(
    resp: requests.Response, url: str, ip: str, sent_at: float, dec: BodyDecoder, *, truncated: str
) -> WireRecord | None:
    heads = getattr(resp, "wire_heads", None)
    if heads is None:
        return None
    sent, line, headers, went_at = heads
    return WireRecord(url, ip, went_at or sent_at, sent, line, headers, dec.raw, truncated)


class ThreadedFetcher(EngineFetcher):
    """Thread-per-download fetcher with AioFetcher's interface (``fetch_batch`` is async); ``threads``
    defaults to ``fetch.concurrency``."""

    def __init__(self, settings: Settings, *, threads: int | None = None, **kw: Any) -> None:
        super().__init__(settings, **kw)
        self.threads = threads or settings.fetch.concurrency
        self._transport: ThreadedTransport | None = None

    def _open_transport(self, guarded: GuardedResolver) -> ThreadedTransport:
        self._transport = ThreadedTransport(
            self.settings.fetch, threads=self.threads, clock=self.clock, capture=self.archive is not None
        )
        return self._transport

    async def _close_transport(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
