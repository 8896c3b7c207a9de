"""A bandwidth-limited path per fetch node, for ``bench s3 --means bandwidth``: node speeds that differ by
a real means under which a batch's time grows with its size (S3's model, time = n * t_i).

Each node gets its own resolver (``NodeDns``: every name -> that node's proxy address, 127.0.10.x, inside
the fleet's allowed network) and its own TCP proxy (``ThrottledProxy``) on that address and the
testbed's port, which forwards to the testbed and lets the responses through at ``rate`` bytes/s (one
token bucket per node, shared by all the node's connections, like the node's access link). The testbed
serves every host name on one address by the Host header, so the proxy forwards bytes untouched.
Requests go out unthrottled; they are a few hundred bytes against pages of 10-30 KB.

Only loopback addresses are used. I/O at the edges: a thread with its own asyncio loop for the
proxies, dnslib's threaded UDP server for the names.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

CHUNK = 8192  # bytes forwarded per step: small enough that the bucket's pace is smooth


@dataclass(slots=True)
class Bucket:
    """Bytes/s token bucket (one per node), burst ``CHUNK * 2``; ``take`` says how long to wait first."""

    rate: float
    burst: float = CHUNK * 2
    _tokens: float = CHUNK * 2
    _at: float = field(default_factory=time.monotonic)

    def take(self, n: int, now: float) -> float:
        """Take ``n`` bytes at ``now``; returns the seconds to wait before sending them (0 = at once)."""
        self._tokens = min(self.burst, self._tokens + self.rate * max(0.0, now - self._at))
        self._at = max(self._at, now)
        self._tokens -= n
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


class ThrottledProxy:
    """Listens on ``listen`` (host, port) and forwards each connection to ``target``; responses paced."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], *, rate: float) -> None:
        self.listen, self.target = listen, target
        self.bucket = Bucket(rate)
        self.bytes_down = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, *self.listen)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_w, paced=False), self._pipe(up_r, writer, paced=True),
                             return_exceptions=True)  # fmt: skip

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, paced: bool) -> None:
        try:
            while data := await src.read(CHUNK):
                if paced:
                    wait = self.bucket.take(len(data), time.monotonic())
                    if wait > 0:
                        await asyncio.sleep(wait)
                    self.bytes_down += len(data)
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()


class NodeDns:
    """A UDP name server answering every A query with ``address`` (the node's proxy), TTL 300."""

    def __init__(self, address: str) -> None:
        from dnslib import QTYPE, RR, A
        from dnslib.server import BaseResolver, DNSLogger, DNSServer

        class _All(BaseResolver):  # type: ignore[misc]
            def resolve(self, request: Any, handler: Any) -> Any:
                reply = request.reply()
                if request.q.qtype in (QTYPE.A, QTYPE.ANY):
                    reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(address), ttl=300))
                return reply

        self.server = DNSServer(
            _All(), address="127.0.0.1", port=0, logger=DNSLogger("-request,-reply,-truncated")
        )
        self.server.start_thread()
        self.port = int(self.server.server.server_address[1])

    def close(self) -> None:
        self.server.stop()


@dataclass(slots=True)
class NodePath:
    """One node's path: its name server (``dns``, "HOST:PORT" for CRAWLFLEET_DNS_SERVERS) and proxy."""

    dns: NodeDns
    proxy: ThrottledProxy

    @property
    def dns_server(self) -> str:
        return f"127.0.0.1:{self.dns.port}"


class Paths:
    """The proxies' loop thread and every node's path; ``add`` one per node, ``close`` at the end."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="s3-throttle", daemon=True)
        self._thread.start()
        self.paths: list[NodePath] = []

    def add(self, address: str, *, port: int, target: str, rate: float) -> NodePath:
        proxy = ThrottledProxy((address, port), (target, port), rate=rate)
        asyncio.run_coroutine_threadsafe(proxy.start(), self._loop).result(10)
        path = NodePath(NodeDns(address), proxy)
        self.paths.append(path)
        return path

    def close(self) -> None:
        for p in self.paths:
            p.dns.close()
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(p.proxy.close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
