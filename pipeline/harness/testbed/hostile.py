"""hostile.crawl.test: a raw asyncio HTTP server whose answers misbehave (reliability suite).

It runs only with ``--hostile``, on its own port (``hostile_port`` in the ready file) on
127.0.10.1, and writes bytes by hand so it can break HTTP in ways a framework refuses to.
Nothing in the normal web links here; start a crawl at ``hostile_seed`` (the index page).

=========================  ===========================================================
path                       behaviour
=========================  ===========================================================
/                          index linking every path below
/bomb                      gzip bomb: ~1 MB on the wire, 1 GiB decompressed
/brbomb                    brotli bomb (when ``brotli`` imports): ~200 KB -> 1 GiB
/zstdbomb                  zstd bomb (``Content-Encoding: zstd``): ~40 KB -> 1 GiB
/trickle                   slowloris: Content-Length 600, one byte a second
/endless                   chunked body that never ends
/deep-redirect/{n}         302 to n+1 until n = 10000, then 200
/badlen                    Content-Length 100000, 1000 bytes sent, connection closed
/hugeheaders               ~100 KB of response headers
/manylinks                 HTML with 1,000,000 links, streamed
/nested                    100,000 nested <div>s, streamed
/badutf8                   declared utf-8, invalid sequences and NUL bytes, odd links
/ssrf-redirect             302 to http://private.crawl.test:{port}/ (a private address)
/ip-redirect               302 to http://127.0.0.53:{port}/
/rawbad/status             invalid status line
/rawbad/garbage            not HTTP at all
/rawbad/chunked            invalid chunk size (sent with the head)
/rawbad/latechunk          the same invalid chunk, sent 50 ms after the head
/rawbad/header             header line without a colon
/rawbad/close              connection closed without a response
=========================  ===========================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pipeline.harness.testbed.accesslog import AccessLog

HOST = "hostile.crawl.test"
ADDRESS = "127.0.10.1"
DEEP_REDIRECTS = 10_000
BOMB_MB = 1024
TRICKLE_BYTES = 600
MANY_LINKS = 1_000_000
NESTING = 100_000
PATHS = (
    "/bomb", "/brbomb", "/zstdbomb", "/trickle", "/endless", "/deep-redirect/0", "/badlen", "/hugeheaders",
    "/manylinks", "/nested", "/badutf8", "/ssrf-redirect", "/ip-redirect",
    "/rawbad/status", "/rawbad/garbage", "/rawbad/chunked", "/rawbad/latechunk", "/rawbad/header",
    "/rawbad/close",
)  # fmt: skip


def gzip_bomb(mb: int = BOMB_MB) -> bytes:
    """A valid gzip stream of ``mb`` MiB of zeros, built without ever holding them: after a full
    flush deflate forgets its history, so one compressed 1 MiB block can be repeated verbatim."""
    zeros = bytes(1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    tail = c.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(mb):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + block * mb + tail + struct.pack("<II", crc, (mb << 20) & 0xFFFFFFFF)


def brotli_bomb(mb: int = BOMB_MB) -> bytes | None:
    try:
        import brotli
    except ImportError:
        return None
    zeros = bytes(1 << 20)
    c = brotli.Compressor(quality=1)
    parts = [c.process(zeros) for _ in range(mb)]
    parts.append(c.finish())
    return b"".join(parts)


def zstd_bomb(mb: int = BOMB_MB) -> bytes:
    """One zstd frame of ``mb`` MiB of zeros (a streamed frame: no content size in its header, as a server
    compressing on the fly sends it), built 1 MiB at a time."""
    import zstandard

    zeros = bytes(1 << 20)
    c = zstandard.ZstdCompressor(level=3).compressobj()
    parts = [c.compress(zeros) for _ in range(mb)]
    parts.append(c.flush())
    return b"".join(parts)


def _head(status: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers), "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


Writer = asyncio.StreamWriter
Handler = Callable[["HostileSite", Writer, str], Awaitable[int]]


@dataclass(slots=True)
class HostileSite:
    """One connection = one request; every answer ends with closing the connection."""

    port: int  # the hostile server's own port (links carry it)
    web_port: int  # the normal web's port (for the SSRF redirects)
    log: AccessLog
    _bombs: dict[str, bytes | None] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    async def serve(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        peer = writer.get_extra_info("peername")
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            start = time.time()
            lines = head.split(b"\r\n")
            line = lines[0].decode("latin-1").split(" ")
            path = line[1] if len(line) == 3 else "/"
            ua = next((v.strip().decode("latin-1") for k, _, v in (h.partition(b":") for h in lines[1:])
                       if k.strip().lower() == b"user-agent"), "")  # fmt: skip
            status = await self._dispatch(writer, path)
            self.log.record(HOST, path, peer[0] if peer else "", status, start=start, ua=ua)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(writer.wait_closed(), 5)

    async def _dispatch(self, w: Writer, path: str) -> int:
        if path.startswith("/deep-redirect/"):
            n = path.rsplit("/", 1)[1]
            k = int(n) if n.isdigit() else 0
            if k >= DEEP_REDIRECTS:
                return self._html(w, 200, "<html><body>bottom of the chain</body></html>")
            w.write(_head("302 Found", [("Location", f"/deep-redirect/{k + 1}"), ("Content-Length", "0")]))
            return 302
        handler = _ROUTES.get(path)
        if handler is None:
            return self._html(w, 404, "<html><body>not found</body></html>")
        return await handler(self, w, path)

    def _html(
        self, w: Writer, status: int, body: str | bytes, ctype: str = "text/html; charset=utf-8"
    ) -> int:
        data = body.encode() if isinstance(body, str) else body
        reason = {200: "OK", 404: "Not Found"}.get(status, "Status")
        w.write(
            _head(f"{status} {reason}", [("Content-Type", ctype), ("Content-Length", str(len(data)))]) + data
        )
        return status

    # --- handlers ------------------------------------------------------------------------
    async def index(self, w: Writer, path: str) -> int:
        links = "".join(f'<li><a href="{self.url(p)}">{p}</a></li>\n' for p in PATHS)
        return self._html(
            w, 200, f"<html><head><title>hostile</title></head><body><ul>\n{links}</ul></body></html>"
        )

    async def _bomb(self, w: Writer, kind: str) -> int:
        if kind not in self._bombs:
            make = {"gzip": gzip_bomb, "br": brotli_bomb, "zstd": zstd_bomb}[kind]
            self._bombs[kind] = await asyncio.get_running_loop().run_in_executor(None, make)
        data = self._bombs[kind]
        if data is None:
            return self._html(w, 404, "no brotli here")
        hdrs = [("Content-Type", "text/html"), ("Content-Encoding", kind), ("Content-Length", str(len(data)))]
        w.write(_head("200 OK", hdrs))
        view = memoryview(data)
        for start in range(0, len(data), 1 << 16):
            w.write(view[start : start + (1 << 16)])
            await w.drain()
        return 200

    async def bomb(self, w: Writer, path: str) -> int:
        return await self._bomb(w, "gzip")

    async def brbomb(self, w: Writer, path: str) -> int:
        return await self._bomb(w, "br")

    async def zstdbomb(self, w: Writer, path: str) -> int:
        return await self._bomb(w, "zstd")

    async def trickle(self, w: Writer, path: str) -> int:
        w.write(_head("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(TRICKLE_BYTES))]))
        body = (b"<html><body>" + b"s" * TRICKLE_BYTES)[:TRICKLE_BYTES]
        for k in range(TRICKLE_BYTES):
            w.write(body[k : k + 1])
            await w.drain()
            await asyncio.sleep(1.0)
        return 200

    async def _chunked(self, w: Writer, chunks: Callable[[int], bytes | None]) -> int:
        w.write(
            _head("200 OK", [("Content-Type", "text/html; charset=utf-8"), ("Transfer-Encoding", "chunked")])
        )
        k = 0
        while (chunk := chunks(k)) is not None:
            w.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            await w.drain()
            k += 1
        w.write(b"0\r\n\r\n")
        return 200

    async def endless(self, w: Writer, path: str) -> int:
        block = b"<p>" + b"endless " * 8000 + b"</p>\n"
        return await self._chunked(w, lambda k: block)

    async def manylinks(self, w: Writer, path: str) -> int:
        per = 10_000
        n_chunks = MANY_LINKS // per

        def chunk(k: int) -> bytes | None:
            if k < n_chunks:
                first = b"<html><body>\n" if k == 0 else b""
                links = "".join(f'<a href="/m/{n}">{n}</a>\n' for n in range(k * per, (k + 1) * per))
                return first + links.encode()
            return b"</body></html>\n" if k == n_chunks else None

        return await self._chunked(w, chunk)

    async def nested(self, w: Writer, path: str) -> int:
        per = 10_000
        rounds = NESTING // per

        def chunk(k: int) -> bytes | None:
            if k < rounds:
                return (b"<html><body>" if k == 0 else b"") + b"<div>" * per
            if k < 2 * rounds:
                return b"</div>" * per
            return b'<a href="/">home</a></body></html>' if k == 2 * rounds else None

        return await self._chunked(w, chunk)

    async def badlen(self, w: Writer, path: str) -> int:
        w.write(_head("200 OK", [("Content-Type", "text/html"), ("Content-Length", "100000")]))
        w.write(b"<html><body>" + b"x" * 988)
        return 200

    async def hugeheaders(self, w: Writer, path: str) -> int:
        hdrs = [(f"X-Filler-{k}", "h" * 1000) for k in range(100)]
        hdrs += [("Content-Type", "text/html"), ("Content-Length", "13")]
        w.write(_head("200 OK", hdrs) + b"<html></html>")
        return 200

    async def badutf8(self, w: Writer, path: str) -> int:
        body = (
            b"<html><head><meta charset='utf-8'><title>bad \xff\xfe utf8</title></head><body>"
            b"<p>\xc3\x28 \xa0\xa1 \xe2\x28\xa1 \xf0\x28\x8c\xbc \xed\xa0\x80 \x00 nul</p>"
            b'<a href="/nul\x00byte">nul</a><a href="/pct%00nul">pct nul</a>'
            b'<a href="http://xn--.crawl.test/">bad punycode</a><a href="http://b\xc3\xbccher.crawl.test/">idn</a>'
            b'<a href="http://' + b"a" * 70 + b'.crawl.test/">long label</a><a href="/\xff\xfe">raw bytes</a>'
            b"</body></html>"
        )
        return self._html(w, 200, body)

    async def ssrf_redirect(self, w: Writer, path: str) -> int:
        w.write(
            _head(
                "302 Found",
                [("Location", f"http://private.crawl.test:{self.web_port}/"), ("Content-Length", "0")],
            )
        )
        return 302

    async def ip_redirect(self, w: Writer, path: str) -> int:
        w.write(
            _head("302 Found", [("Location", f"http://127.0.0.53:{self.web_port}/"), ("Content-Length", "0")])
        )
        return 302

    async def raw(self, w: Writer, path: str) -> int:
        kind = path.rsplit("/", 1)[1]
        if kind == "status":
            w.write(b"HTTP/1.1 2000 WHAT IS THIS\r\nContent-Length: 2\r\n\r\nok")
        elif kind == "garbage":
            w.write(b"\x00\x01\x02 this is not http at all \xff\xfe\r\n\r\n")
        elif kind in ("chunked", "latechunk"):
            w.write(_head("200 OK", [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]))
            if kind == "latechunk":  # the client has parsed the head and is reading the body
                await w.drain()
                await asyncio.sleep(0.05)
            w.write(b"5\r\nhello\r\nzz-not-hex\r\nmore\r\n0\r\n\r\n")
        elif kind == "header":
            w.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nthis line has no colon\r\nContent-Length: 2\r\n\r\nok"
            )
        # "close": nothing at all
        return 0


_ROUTES: dict[str, Handler] = {
    "/": HostileSite.index,
    "/bomb": HostileSite.bomb,
    "/brbomb": HostileSite.brbomb,
    "/zstdbomb": HostileSite.zstdbomb,
    "/trickle": HostileSite.trickle,
    "/endless": HostileSite.endless,
    "/badlen": HostileSite.badlen,
    "/hugeheaders": HostileSite.hugeheaders,
    "/manylinks": HostileSite.manylinks,
    "/nested": HostileSite.nested,
    "/badutf8": HostileSite.badutf8,
    "/ssrf-redirect": HostileSite.ssrf_redirect,
    "/ip-redirect": HostileSite.ip_redirect,
    **{f"/rawbad/{k}": HostileSite.raw for k in ("status", "garbage", "chunked", "latechunk", "header", "close")},
}


async def start_hostile(site: HostileSite, port: int) -> asyncio.AbstractServer:
    """Serve the hostile host on ADDRESS:port (0 = free); ``site.port`` is set to the real port."""
    server = await asyncio.start_server(site.serve, ADDRESS, port, limit=1 << 16, reuse_address=True)
    site.port = server.sockets[0].getsockname()[1]
    return server
