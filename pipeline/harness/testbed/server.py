"""The testbed HTTP server: aiohttp's low-level server, one listening socket per loopback address.

Routing is by the Host header (port ignored, any case). Replies come from ``Renderer`` (an LRU
of rendered pages); the handler adds only a dict lookup, an access-log append and the response
object, so one process serves several thousand pages a second.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
from dataclasses import dataclass, field

from aiohttp import web as aioweb
from aiohttp.web_server import Server

from pipeline.harness.testbed.accesslog import FLUSH_HOST, AccessLog
from pipeline.harness.testbed.liverender import LiveRenderer
from pipeline.harness.testbed.living import ROBOTS_CHANGE_HOST
from pipeline.harness.testbed.model import EXPIRED_HOST, WRONGNAME_HOST, Web, host_index
from pipeline.harness.testbed.render import Renderer

# Names that resolve in the DNS zone and answer a tiny page (IPv6, TTL, SSRF and TLS certificate tests).
MISC_HOSTS = frozenset({"v6.crawl.test", "shortttl.crawl.test", "longttl.crawl.test", "private.crawl.test",
                        EXPIRED_HOST, WRONGNAME_HOST})  # fmt: skip
READY_HOST = "readiness.invalid"  # the self-check; not logged


def strip_port(host: str) -> str:
    """Lower-case host of a Host header value, without the port (IPv6 literals keep brackets)."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    colon = host.rfind(":")
    host = host[:colon] if colon >= 0 else host
    return host.rstrip(".")


def bind_sockets(ips: list[str], port: int, *, reuse_port: bool, attempts: int = 50) -> list[socket.socket]:
    """One listening TCP socket per address, all on the same port (0 = pick a free one)."""
    for _ in range(attempts):
        socks: list[socket.socket] = []
        try:
            chosen = port
            for ip in ips:
                family = socket.AF_INET6 if ":" in ip else socket.AF_INET
                s = socket.socket(family, socket.SOCK_STREAM)
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if reuse_port:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                s.bind((ip, chosen))
                chosen = s.getsockname()[1]
                s.listen(2048)
                s.setblocking(False)
            return socks
        except OSError as exc:
            for s in socks:
                s.close()
            if port != 0 or exc.errno != errno.EADDRINUSE:
                raise
    raise OSError(errno.EADDRINUSE, "no common free port on all testbed addresses")


@dataclass(slots=True)
class TestbedHTTP:
    """Request handling for one process (the ``--engine aiohttp`` alternative to FastHTTP)."""

    web: Web
    log: AccessLog
    cache_size: int = 4096
    renderer: Renderer = field(init=False)
    live: LiveRenderer | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.renderer = Renderer(self.web, cache_size=self.cache_size)
        if self.web.living is not None:  # the living web (--mutate): see liverender.py
            self.live = LiveRenderer(self.web, cache_size=self.cache_size)

    async def handle(self, request: aioweb.BaseRequest) -> aioweb.StreamResponse:
        start = time.time()
        host = strip_port(request.headers.get("Host", ""))
        path = request.raw_path
        client = request.remote or ""
        ua = request.headers.get("User-Agent", "")
        i = host_index(host, self.web.hosts)
        if i < 0:
            if host == FLUSH_HOST:
                self.log.flush()
                return aioweb.Response(status=200, text=str(os.getpid()))
            if host == ROBOTS_CHANGE_HOST and self.live is not None:
                changed_at = self.live.change_robots(time.time())
                self.web = self.live.web
                return aioweb.Response(status=200, text=f"{os.getpid()} {changed_at!r}")
            status = 200 if host in MISC_HOSTS and path == "/" else 404
            body = f"<html><body>{host}</body></html>" if status == 200 else "unknown host"
            resp = aioweb.Response(status=status, text=body, content_type="text/html")
            return await self._sent(request, resp, host, path, client, ua, start, logged=host != READY_HOST)
        if self.live is not None:
            reply = self.live.reply(
                i,
                path,
                time.time(),
                if_none_match=request.headers.get("If-None-Match"),
                if_modified_since=request.headers.get("If-Modified-Since"),
            )
        else:
            reply = self.renderer.reply(i, path)
        if reply.delay_s:
            try:
                await asyncio.sleep(reply.delay_s)
            except asyncio.CancelledError:  # the client left (handler_cancellation)
                self.log.record(host, path, client, 499, start=start, ua=ua)
                raise
        headers = {"Content-Type": reply.content_type} if reply.status != 304 else {}
        headers.update(reply.headers)
        resp = aioweb.Response(status=reply.status, body=reply.body, headers=headers)
        return await self._sent(request, resp, host, path, client, ua, start)

    async def _sent(self, request: aioweb.BaseRequest, resp: aioweb.Response, host: str, path: str, client: str,
                    ua: str, start: float, *, logged: bool = True) -> aioweb.StreamResponse:  # fmt: skip
        """Write ``resp`` out, then log the request (status 499 if the client left first)."""
        status = resp.status
        try:
            await resp.prepare(request)
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            status = 499
            raise
        finally:
            if logged:
                self.log.record(host, path, client, status, start=start, ua=ua)
        return resp

    async def start(self, socks: list[socket.socket]) -> list[asyncio.AbstractServer]:
        """Serve on the given listening sockets; returns the asyncio servers (close them to stop)."""
        loop = asyncio.get_running_loop()
        server = Server(self.handle, access_log=None, handler_cancellation=True)
        self.log.start()
        return [await loop.create_server(server, sock=s, backlog=2048) for s in socks]
