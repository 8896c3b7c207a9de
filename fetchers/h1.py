"""The lean HTTP/1.1 fetcher (``--fetcher h1``, the default): the aiohttp fetcher's engine and records over
a transport of our own, because aiohttp's client spends about 90 us of CPU on each request around the
socket work (its request and response objects, stream readers, timer handles, ~230 Python calls), which
on small pages is the largest part of a crawl's per-page CPU (measured 2026-11-28 with aiohttp 3.14.5 on
uvloop: a loop of ``session.get`` ~110 us of CPU per request of a testbed page, a bare asyncio protocol
~20 us).

What it does, in the terms of ``fetchers.exchange.Transport``: GET over a keep-alive connection to the
address the engine resolved and checked (``ip``; TLS with SNI and the fetcher's ``client_context``),
the response parsed by llhttp (``fetchers.h1conn``), its body fed to ``BodyDecoder`` under the cap as it
arrives, timeouts as aiohttp's (connect, read gap, total), and a reused keep-alive connection that the
server closed before answering tried once more on a new one (as aiohttp does). Error classes are those
of ``fetchers.aio.classify``. With an archive it fills ``Exchange.wire`` with the request head as written
and the response head as parsed.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections.abc import Callable
from typing import Any

import httptools
from aiohttp.abc import AbstractResolver

from fetchers.aio import KEEP_HEADERS
from fetchers.body import ACCEPT_ENCODING
from fetchers.conditional import REQUEST_HEADERS
from fetchers.exchange import REDIRECT_STATUSES, SEND_FENCE, SENT, Exchange
from fetchers.fetcher import EngineFetcher
from fetchers.guard import GuardedResolver
from fetchers.h1conn import BAD, COMPLETE, LOST, STOPPED, TIMEOUT, TOO_LARGE, End, H1Conn
from fetchers.report import LEASE_LAPSED
from fetchers.tls import cert_error_class, client_context
from fetchers.wire import WireRecord, status_line
from pipeline.settings import FetchSettings

_REDIRECT_BODY_CAP = 64 * 1024  # read (and drop) small redirect bodies so the connection can be reused
KEEPALIVE_S = 15.0  # an idle connection older than this is closed (aiohttp's keepalive_timeout here too)
Key = tuple[str, str, int, bool]  # (host, ip, port, tls)


class H1Pool:
    """Idle keep-alive connections by (host, ip, port, tls); swept every ``KEEPALIVE_S``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.idle: dict[Key, list[H1Conn]] = {}
        self.busy: set[H1Conn] = set()
        self._sweep: asyncio.TimerHandle | None = None

    def take(self, key: Key) -> H1Conn | None:
        conns = self.idle.get(key)
        now = self.loop.time()
        while conns:
            conn = conns.pop()
            if not conn.closed and now - conn.idle_since < KEEPALIVE_S:
                self.busy.add(conn)
                return conn
            conn.abort()
        return None

    def give(self, key: Key, conn: H1Conn) -> None:
        self.busy.discard(conn)
        if conn.closed:
            return
        conn.idle_since = self.loop.time()
        self.idle.setdefault(key, []).append(conn)
        if self._sweep is None:
            self._sweep = self.loop.call_later(KEEPALIVE_S, self.sweep)

    def drop(self, conn: H1Conn) -> None:
        self.busy.discard(conn)
        conn.abort()

    def sweep(self) -> None:
        self._sweep = None
        now = self.loop.time()
        for key in list(self.idle):
            keep = [c for c in self.idle[key] if not c.closed and now - c.idle_since < KEEPALIVE_S]
            for c in self.idle[key]:
                if c not in keep:
                    c.abort()
            if keep:
                self.idle[key] = keep
            else:
                del self.idle[key]
        if self.idle:
            self._sweep = self.loop.call_later(KEEPALIVE_S, self.sweep)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conns in self.idle.values():
            for c in conns:
                c.abort()
        for c in self.busy:
            c.abort()
        self.idle.clear()
        self.busy.clear()


class H1Transport:
    """One HTTP exchange over the pool; implements ``fetchers.engine.Transport``."""

    def __init__(self, fetch: FetchSettings, clock: Callable[[], float], *, capture: bool = False) -> None:
        self._clock = clock
        self.capture = capture
        self._fetch = fetch
        self._ssl = client_context(fetch)
        self._agent = (f"User-Agent: {fetch.agent_for(os.getpid())}\r\nAccept-Encoding: {ACCEPT_ENCODING}\r\n"
                       "Accept: */*\r\n")  # fmt: skip
        self._pool: H1Pool | None = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def _request(self, host: str, path: str) -> bytes:
        extra = REQUEST_HEADERS.get()
        head = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{self._agent}"
        if extra:
            head += "".join(f"{k}: {v}\r\n" for k, v in extra.items())
        return (head + "\r\n").encode("utf-8", "surrogateescape")  # header values as they came

    async def exchange(self, url: str, host: str, ip: str, *, max_body: int) -> Exchange:
        ex = Exchange()
        try:
            return await self._exchange(ex, url, host, ip, max_body)
        except asyncio.CancelledError:
            raise
        except ssl.SSLError as exc:  # a certificate failure is a class of its own (fetchers.tls)
            ex.error_class, ex.retryable = cert_error_class(exc) or "tls_error", False
            ex.error_message = f"{type(exc).__name__}: {exc}"[:300]
        except TimeoutError as exc:  # connecting (a timeout after the request went out ends in _exchange)
            ex.error_class, ex.retryable = "timeout", True
            ex.error_message = f"connect timeout {exc}"[:300]
        except OSError as exc:
            ex.error_class, ex.retryable = "connect_error", True
            ex.error_message = f"{type(exc).__name__}: {exc}"[:300]
        except (UnicodeError, ValueError) as exc:
            ex.error_class, ex.retryable = "invalid_url", False
            ex.error_message = f"{type(exc).__name__}: {exc}"[:300]
        return ex

    async def _exchange(self, ex: Exchange, url: str, host: str, ip: str, max_body: int) -> Exchange:
        tls = url.startswith("https:")
        start = url.index("//") + 2
        slash = url.find("/", start)
        authority = url[start:] if slash < 0 else url[start:slash]
        path = "/" if slash < 0 else url[slash:]
        name, port = _name_port(authority, 443 if tls else 80)
        request = self._request(authority, path)
        loop = asyncio.get_running_loop()
        if self._pool is None:
            self._pool = H1Pool(loop)
        pool, f = self._pool, self._fetch
        key = (authority, ip, port, tls)
        t0 = self._clock()
        for attempt in (0, 1):
            conn = pool.take(key)
            reused = conn is not None
            if conn is None:
                t_conn = self._clock()
                conn = await self._connect(loop, ip, port, name if tls else None, f)
                ex.connect_s = self._clock() - t_conn
                pool.busy.add(conn)
                fence = SEND_FENCE.get()
                if fence is not None and not fence():  # stopped while connecting: send nothing now
                    pool.give(key, conn)
                    ex.error_class, ex.error_message = LEASE_LAPSED, "not sent: the batch's lease lapsed while connecting"
                    return ex
            sent_at = time.time() if self.capture else 0.0

            def limit(status: int) -> int:
                return _REDIRECT_BODY_CAP if status in REDIRECT_STATUSES else max_body

            try:
                done = conn.begin(request, limit, self.capture)  # written to the socket now
                went = SENT.get()
                if went is not None:
                    went()
                end = await self._wait(conn, done, loop, f, t0)
            except BaseException:
                pool.drop(conn)
                raise
            if end.how == LOST and reused and conn.fed == 0 and attempt == 0:
                pool.drop(conn)  # a keep-alive connection the server had closed: once more, on a new one
                continue
            break
        assert conn is not None
        self._fill(ex, conn, end, url, ip, request, sent_at, t0)
        conn.decoder, conn.raw_headers = None, []  # an idle connection must not hold the last body
        if end.how == COMPLETE and conn.keep_alive and not conn.closed:
            pool.give(key, conn)
        else:
            pool.drop(conn)
        return ex

    async def _connect(self, loop: asyncio.AbstractEventLoop, ip: str, port: int, server_name: str | None,
                       f: FetchSettings) -> H1Conn:  # fmt: skip
        pool = self._pool
        assert pool is not None

        def factory() -> H1Conn:
            return H1Conn(loop, max_head=f.max_header_bytes, on_closed=pool.busy.discard)

        kwargs: dict[str, Any] = {}
        if server_name is not None:
            kwargs = {"ssl": self._ssl, "server_hostname": server_name.strip("[]"),
                      "ssl_handshake_timeout": f.connect_timeout_s}  # fmt: skip
        _, conn = await asyncio.wait_for(loop.create_connection(factory, ip, port, **kwargs), f.connect_timeout_s)
        return conn

    async def _wait(self, conn: H1Conn, done: asyncio.Future[End], loop: asyncio.AbstractEventLoop,
                    f: FetchSettings, t0: float) -> End:  # fmt: skip
        """The exchange's end, or TIMEOUT: past the total timeout, or no byte for the read timeout."""
        deadline = loop.time() + max(0.0, f.total_timeout_s - (self._clock() - t0))
        read_s = f.read_timeout_s

        def check() -> None:
            now = loop.time()
            if done.done():
                return
            due = min(deadline, conn.last_data + read_s)
            if now >= due:
                done.set_result(End(TIMEOUT, "total" if now >= deadline else "read"))
                conn.abort()
            else:
                timer[0] = loop.call_at(due, check)

        timer = [loop.call_at(min(deadline, conn.last_data + read_s), check)]
        try:
            return await done
        finally:
            timer[0].cancel()

    def _fill(self, ex: Exchange, conn: H1Conn, end: End, url: str, ip: str, request: bytes, sent_at: float,
              t0: float) -> None:  # fmt: skip
        how = end.how
        if conn.head_done:
            ex.ttfb_s = conn.head_at - t0 if conn.head_at else 0.0
            ex.status = conn.status
            raw = conn.raw_headers
            seen: dict[str, str] = {}
            for name, value in raw:
                low = name.decode("latin-1").lower()
                if low in _KEEP:
                    text = value.decode("utf-8", "surrogateescape")
                    if low not in seen:
                        seen[low] = text
                    elif low == "x-robots-tag":  # may repeat; each header is its own scope
                        seen[low] += "\n" + text
            ex.headers = {k: seen[k] for k in KEEP_HEADERS if k in seen}
            ex.content_type = ex.headers.get("content-type", "").partition(";")[0].strip().lower()
            ex.ip = ip
            peer = conn.transport.get_extra_info("peername") if conn.transport is not None else None
            if peer:
                ex.ip = peer[0]
            decoder = conn.decoder
            if self.capture:
                ex.wire = WireRecord(url, ip, sent_at, request, status_line(conn.version, conn.status,
                                     conn.reason.decode("latin-1")), tuple(raw))  # fmt: skip
            if decoder is not None:
                ex.body, ex.wire_bytes, ex.truncated = decoder.body, decoder.wire, decoder.truncated
                if ex.wire is not None:
                    ex.wire.payload = decoder.raw
                    if how != COMPLETE:
                        ex.wire.truncated = ("length" if decoder.truncated else
                                             "time" if how == TIMEOUT else "disconnect")  # fmt: skip
                if decoder.error:
                    ex.error_class, ex.error_message = "decode_error", decoder.error
            if how in (COMPLETE, STOPPED):
                return
            ex.retryable = False
            if how == TIMEOUT:
                ex.error_class, ex.error_message = "timeout", f"{end.detail} timeout after the response head"
            elif how == BAD:
                ex.error_class, ex.error_message = "bad_response", f"malformed body: {end.detail}"[:300]
            else:
                ex.error_class = "incomplete_body"
                ex.error_message = f"the body ended early: {end.detail or 'connection closed'}"[:300]
            return
        # No response head.
        if how == TIMEOUT:
            ex.error_class, ex.retryable = "timeout", True
        elif how == TOO_LARGE:
            ex.error_class, ex.retryable = "headers_too_large", False
        elif how == BAD:
            ex.error_class, ex.retryable = ("bad_status_line" if not conn.status and _status_error(end) else
                                            "bad_response"), False  # fmt: skip
            if conn.head_size > conn.max_head:
                ex.error_class = "headers_too_large"
        elif end.error is not None:  # reset, broken pipe
            ex.error_class, ex.retryable = "connect_error", True
        else:
            ex.error_class, ex.retryable = "server_disconnected", False
        ex.error_message = (end.detail or ex.error_class)[:300]


_KEEP = frozenset(KEEP_HEADERS)


def _status_error(end: End) -> bool:
    """A parse error of the status line (llhttp: invalid constant, version or status)."""
    if isinstance(end.error, httptools.HttpParserInvalidStatusError):
        return True
    text = end.detail.lower()
    return any(w in text for w in ("status", "version", "constant", "expected http"))


def _name_port(authority: str, default: int) -> tuple[str, int]:
    if authority.startswith("["):
        end = authority.find("]")
        rest = authority[end + 1 :]
        return authority[: end + 1], int(rest[1:]) if rest.startswith(":") else default
    name, sep, port = authority.rpartition(":")
    if sep and port.isdigit():
        return name, int(port)
    return authority, default


class H1Fetcher(EngineFetcher):
    """The event-driven fetcher over ``H1Transport`` (``EngineFetcher`` says the rest). Its connections go
    to the address the engine resolved through the SSRF guard for each hop."""

    _transport: H1Transport | None = None

    def _guard(self, inner: AbstractResolver) -> GuardedResolver:
        from fetchers.aio import _NonClosingGuard

        return _NonClosingGuard(inner, self.settings.security.allow_networks)

    def _open_transport(self, guarded: GuardedResolver) -> H1Transport:
        self._transport = H1Transport(self.settings.fetch, self.clock, capture=self.archive is not None)
        return self._transport

    async def _close_transport(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
