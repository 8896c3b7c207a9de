"""The default HTTP engine: a minimal HTTP/1.1 server on asyncio.Protocol.

Why not aiohttp's server: on a 2-core box the crawler and the testbed share the CPU, and
aiohttp spends ~100 us per request in its own machinery; this spends a few. It implements
what a crawler's client needs: GET/HEAD, keep-alive, pipelining (responses in order),
``Connection: close``, HTTP/1.0, request bodies with Content-Length (skipped), 400 on junk and
431 on oversized heads. Pages come from the same ``Renderer`` as the aiohttp engine
(``server.TestbedHTTP``), which stays available with ``--engine aiohttp`` and serves the
streamed hostile host.

Over TLS (``testbed serve --tls``) a second FastHTTP serves the https web (``scheme`` "https") on the TLS
sockets; the plain one then serves the http web as before (``plain_mode`` ""), answers every request of a
known host with a 301 to the same path on the TLS port ("redirect"), or serves the http web under a
robots.txt that disallows everything ("disallow"; http and https of a host are two origins, RFC 9309).

On a living web (``Web.living`` set, ``testbed serve --mutate``) replies come from ``LiveRenderer`` at
the server's clock (``now``, injectable), with ETag/Last-Modified, and a request's If-None-Match /
If-Modified-Since may get a 304 (no Content-Type, no Content-Length, no body).

Each request is logged once its whole reply has been handed to the socket (``accesslog``: start, end,
User-Agent). A request for ``accesslog.FLUSH_HOST`` writes the process's log buffer out before it is
answered (its body is the serving process's pid); it is never logged.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import ssl as _ssl
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import zstandard

from pipeline.harness.testbed.accesslog import FLUSH_HOST, AccessLog
from pipeline.harness.testbed.liverender import LiveRenderer
from pipeline.harness.testbed.living import ROBOTS_CHANGE_HOST
from pipeline.harness.testbed.model import THROTTLE_RETRY_AFTER_S, Web, host_index
from pipeline.harness.testbed.render import Renderer, Reply
from pipeline.harness.testbed.server import MISC_HOSTS, READY_HOST, strip_port

MAX_HEAD = 64 * 1024
_REASONS = {
    200: "OK", 304: "Not Modified", 301: "Moved Permanently", 302: "Found", 400: "Bad Request", 404: "Not Found",
    431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
}  # fmt: skip
_UNKNOWN = Reply(404, b"unknown host", "text/plain")
_DISALLOW_ALL = b"# the plain-HTTP origin of a crawlfleet testbed host\nUser-agent: *\nDisallow: /\n"


def _head(reply: Reply, *, close: bool) -> bytes:
    lines = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}"]
    if reply.status != 304:  # a 304 describes the stored 200; a length of 0 would misstate it
        lines += [f"Content-Type: {reply.content_type}", f"Content-Length: {len(reply.body)}"]
    lines.append("Server: crawlfleet-testbed")
    lines += [f"{k}: {v}" for k, v in reply.headers]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass(slots=True)
class FastHTTP:
    """Request handling shared by all connections of one process."""

    web: Web
    log: AccessLog
    cache_size: int = 4096
    gzip_pages: bool = False  # honour Accept-Encoding: gzip for ordinary 200 HTML pages
    zstd_pages: bool = False  # honour Accept-Encoding: zstd for them (preferred over gzip when both)
    now: Callable[[], float] = time.time  # the living web's clock (wall seconds)
    scheme: str = "http"  # what the access log says the requests came over
    plain_mode: str = ""  # on the plain port of a TLS testbed: "", "redirect" or "disallow" (see above)
    tls_port: int = 0  # where "redirect" sends clients
    renderer: Renderer = field(init=False)
    live: LiveRenderer | None = field(init=False, default=None)
    throttle_hits: int = field(init=False, default=0)  # requests to the throttling host (model.THROTTLE_SLOT)
    _gzipped: Callable[[int, str], Reply] = field(init=False)
    _zstded: Callable[[int, str], Reply] = field(init=False)

    def __post_init__(self) -> None:
        self.renderer = Renderer(self.web, cache_size=self.cache_size)
        if self.web.living is not None:
            self.live = LiveRenderer(self.web, cache_size=self.cache_size)
        self._gzipped = functools.lru_cache(maxsize=self.cache_size)(self._gzip)
        self._zstded = functools.lru_cache(maxsize=self.cache_size)(self._zstd)

    def _gzip(self, i: int, path: str) -> Reply:
        return _encoded(self.renderer.reply(i, path), "gzip")

    def _zstd(self, i: int, path: str) -> Reply:
        return _encoded(self.renderer.reply(i, path), "zstd")

    def reply_for(
        self,
        raw_host: bytes,
        target: bytes,
        client: str,
        *,
        gzip_ok: bool = False,
        zstd_ok: bool = False,
        if_none_match: str | None = None,
        if_modified_since: str | None = None,
    ) -> Reply:
        """The reply to one request (not logged: see ``route``)."""
        return self.route(raw_host, target, gzip_ok=gzip_ok, zstd_ok=zstd_ok, if_none_match=if_none_match,
                          if_modified_since=if_modified_since)[0]  # fmt: skip

    def route(
        self,
        raw_host: bytes,
        target: bytes,
        *,
        gzip_ok: bool = False,
        zstd_ok: bool = False,
        if_none_match: str | None = None,
        if_modified_since: str | None = None,
    ) -> tuple[Reply, str, str, bool]:
        """(reply, host, path, whether the access log records it) of one request."""
        host = strip_port(raw_host.decode("latin-1"))
        path = target.decode("latin-1")
        if path.startswith(("http://", "https://")):  # absolute-form request target
            slash = path.find("/", path.index("//") + 2)
            path = path[slash:] if slash >= 0 else "/"
        i = host_index(host, self.web.hosts)
        if self.plain_mode and (i >= 0 or host in MISC_HOSTS):
            reply = self._plain(host, path)
            if reply is not None:
                return reply, host, path, True
        if i < 0:
            if host == FLUSH_HOST:
                self.log.flush()
                return Reply(200, str(os.getpid()).encode(), "text/plain"), host, path, False
            if host == ROBOTS_CHANGE_HOST and self.live is not None:
                changed_at = self.live.change_robots(self.now())
                self.web = self.live.web
                return Reply(200, f"{os.getpid()} {changed_at!r}".encode(), "text/plain"), host, path, False
            if host in MISC_HOSTS and path == "/":
                reply = Reply(200, f"<html><body>{host}</body></html>".encode())
            else:
                reply = _UNKNOWN
            return reply, host, path, host != READY_HOST
        if self.live is not None and self.web.throttles(i) and path != "/robots.txt":
            self.throttle_hits += 1
            assert self.web.living is not None
            if self.throttle_hits % self.web.living.throttle_every == 0:
                return Reply(429, b"", headers=(("Retry-After", str(THROTTLE_RETRY_AFTER_S)),)), host, path, True
        if self.live is not None:
            reply = self.live.reply(
                i, path, self.now(), if_none_match=if_none_match, if_modified_since=if_modified_since
            )
            if zstd_ok and self.zstd_pages:
                reply = _encoded(reply, "zstd")
            elif gzip_ok and self.gzip_pages:
                reply = _encoded(reply, "gzip")
        elif zstd_ok and self.zstd_pages:
            reply = self._zstded(i, path)
        elif gzip_ok and self.gzip_pages:
            reply = self._gzipped(i, path)
        else:
            reply = self.renderer.reply(i, path)
        return reply, host, path, True

    def _plain(self, host: str, path: str) -> Reply | None:
        """The plain port's answer in a TLS testbed's ``plain_mode``, or None for the ordinary page."""
        if self.plain_mode == "redirect":
            return Reply(301, b"", headers=(("Location", f"https://{host}:{self.tls_port}{path}"),))
        if path == "/robots.txt":
            return Reply(200, _DISALLOW_ALL, "text/plain")
        return None

    async def start(
        self, socks: list[socket.socket], *, ssl: _ssl.SSLContext | None = None
    ) -> list[asyncio.AbstractServer]:
        loop = asyncio.get_running_loop()
        self.log.start()
        return [await loop.create_server(lambda: _Conn(self), sock=s, backlog=2048, ssl=ssl) for s in socks]


def _encoded(r: Reply, coding: str) -> Reply:
    """A 200 HTML reply in content coding ``coding`` (gzip or zstd); any other reply as it is. A living
    web's reply keeps its validators (it is not cached: its bytes change over time)."""
    if r.status != 200 or r.delay_s or not r.content_type.startswith("text/html"):
        return r
    if any(k == "Content-Encoding" for k, _ in r.headers):
        return r
    body = _ZSTD.compress(r.body) if coding == "zstd" else zlib.compress(r.body, 1, wbits=31)
    return Reply(
        200, body, r.content_type, (*r.headers, ("Content-Encoding", coding), ("Vary", "Accept-Encoding"))
    )


_ZSTD = zstandard.ZstdCompressor(level=1)


_Entry = tuple[str, str, str, int, float, str, int]  # host, path, peer, status, start, ua, bytes (-1: none)


class _Conn(asyncio.Protocol):
    __slots__ = ("app", "transport", "peer", "buf", "skip", "waiting", "closing")

    def __init__(self, app: FastHTTP) -> None:
        self.app = app
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.buf = b""
        self.skip = 0  # request-body bytes still to discard
        self.waiting = False  # a delayed reply is pending; later requests queue behind it
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else ""

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if self.skip:
            n = min(self.skip, len(data))
            self.skip -= n
            data = data[n:]
        self.buf = self.buf + data if self.buf else data
        if not self.waiting:
            self._process()

    def _process(self) -> None:
        buf = self.buf
        while buf and self.transport is not None and not self.closing:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    self._fail(431)
                self.buf = buf
                return
            head, buf = buf[:end], buf[end + 4 :]
            parsed = _parse(head)
            if parsed is None:
                self._fail(400)
                return
            method, target, host, close, length, accepts, inm, ims, ua = parsed
            start = time.time()
            if length < 0:
                self._fail(501)
                return
            if length:
                n = min(length, len(buf))
                buf = buf[n:]
                self.skip = length - n
            reply, name, path, logged = self.app.route(
                host, target, gzip_ok=b"gzip" in accepts, zstd_ok=b"zstd" in accepts,
                if_none_match=inm, if_modified_since=ims,
            )  # fmt: skip
            out = _head(reply, close=close)
            if method != b"HEAD":
                out += reply.body
            # a living web's answers carry their size on the wire (head and body) in the log
            size = len(out) if self.app.live is not None else -1
            entry = (name, path, self.peer, reply.status, start, ua, size) if logged else None
            if reply.delay_s > 0:
                self.waiting = True
                self.buf = buf
                asyncio.get_running_loop().call_later(reply.delay_s, self._delayed, out, close, entry)
                return
            self.transport.write(out)
            self._log(entry)
            if close:
                self.closing = True
                self.transport.close()
        self.buf = buf

    def _log(self, entry: _Entry | None, *, gone: bool = False) -> None:
        """Log a request once its reply is written (status 499, as nginx logs it, if the client left first)."""
        if entry is not None:
            host, path, peer, status, start, ua, size = entry
            self.app.log.record(host, path, peer, 499 if gone else status, start=start, ua=ua,
                                scheme=self.app.scheme, nbytes=-1 if gone else size)  # fmt: skip

    def _delayed(self, out: bytes, close: bool, entry: _Entry | None) -> None:
        self.waiting = False
        if self.transport is None:
            self._log(entry, gone=True)
            return
        self.transport.write(out)
        self._log(entry)
        if close:
            self.closing = True
            self.transport.close()
        else:
            self._process()

    def _fail(self, status: int) -> None:
        if self.transport is not None:
            self.transport.write(_head(Reply(status, b""), close=True))
            self.transport.close()
        self.closing = True
        self.buf = b""


def _parse(head: bytes) -> tuple[bytes, bytes, bytes, bool, int, bytes, str | None, str | None, str] | None:
    """(method, target, host, close, content_length, accept_encoding, if_none_match, if_modified_since,
    user_agent) of a request head (accept_encoding lower-cased, b"" when absent); None when malformed.

    content_length is -1 for a chunked request body, which this server does not accept."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return None
    method, target, version = parts
    close = version == b"HTTP/1.0"
    host = b""
    length = 0
    accepts = b""
    inm: str | None = None
    ims: str | None = None
    ua = ""
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            return None
        name = name.lower()
        if name == b"host":
            host = value.strip()
        elif name == b"connection":
            token = value.strip().lower()
            close = token == b"close" or (close and token != b"keep-alive")
        elif name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return None
        elif name == b"transfer-encoding":
            length = -1
        elif name == b"accept-encoding":
            accepts = value.lower()
        elif name == b"if-none-match":
            inm = value.strip().decode("latin-1")
        elif name == b"if-modified-since":
            ims = value.strip().decode("latin-1")
        elif name == b"user-agent":
            ua = value.strip().decode("latin-1")
    return method, target, host, close, length, accepts, inm, ims, ua
