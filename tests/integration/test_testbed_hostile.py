"""hostile.crawl.test misbehaves exactly as documented (checked with raw sockets and aiohttp)."""

from __future__ import annotations

import asyncio
import socket
import time
import zlib
from collections.abc import Iterator

import aiohttp
import brotli
import pytest
import zstandard
from dnslib import DNSRecord

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.hostile import PATHS, gzip_bomb

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    with TestbedProcess(3, 3, hostile=True, workdir=tmp_path_factory.mktemp("tb_hostile")) as t:
        yield t


def raw(
    tb: TestbedProcess, path: str, *, limit: int = 1 << 22, timeout: float = 10, for_s: float = 0
) -> bytes:
    """Response bytes until close, ``limit`` bytes, or (if given) ``for_s`` seconds of reading."""
    stop = time.monotonic() + for_s if for_s else float("inf")
    with socket.create_connection(("127.0.10.1", tb.hostile_port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: hostile.crawl.test\r\n\r\n".encode())
        out = b""
        while len(out) < limit and time.monotonic() < stop and (chunk := s.recv(65536)):
            out += chunk
    return out


def test_gzip_bomb_builder_is_valid() -> None:
    data = gzip_bomb(8)
    assert len(zlib.decompress(data, 31)) == 8 << 20 and len(data) < 20_000


def test_dns_and_index(tb: TestbedProcess) -> None:
    r = DNSRecord.parse(DNSRecord.question("hostile.crawl.test").send("127.0.0.1", tb.dns_port, timeout=2))
    assert str(r.rr[0].rdata) == "127.0.10.1"
    body = raw(tb, "/")
    assert all(tb.hostile_url(p).encode() in body for p in PATHS)
    assert tb.hostile_seed == tb.hostile_url("/")


def test_bombs_small_on_wire(tb: TestbedProcess) -> None:
    out = raw(tb, "/bomb", limit=1 << 30, timeout=60)
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Content-Encoding: gzip" in head and len(body) < 2 << 20
    d = zlib.decompressobj(31)
    assert len(d.decompress(body, 1 << 20)) == 1 << 20  # inflates; we stop at 1 MiB
    out = raw(tb, "/brbomb", limit=1 << 30, timeout=60)
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Content-Encoding: br" in head and len(body) < 1 << 20
    assert len(brotli.Decompressor().process(body[:4096])) > 1 << 20
    out = raw(tb, "/zstdbomb", limit=1 << 30, timeout=60)
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Content-Encoding: zstd" in head and len(body) < 1 << 20
    reader = zstandard.ZstdDecompressor().stream_reader(body)
    assert len(reader.read(1 << 20)) == 1 << 20  # inflates; we stop at 1 MiB


def test_streams_and_chains(tb: TestbedProcess) -> None:
    out = raw(tb, "/endless", limit=1 << 20)
    assert b"Transfer-Encoding: chunked" in out and len(out) >= 1 << 20
    out = raw(tb, "/trickle", for_s=2.5)
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Content-Length: 600" in head and len(body) < 600  # still trickling
    out = raw(tb, "/deep-redirect/41")
    assert b"302" in out.split(b"\r\n")[0] and b"Location: /deep-redirect/42" in out
    assert b" 200 " in raw(tb, "/deep-redirect/10000").split(b"\r\n")[0]
    out = raw(tb, "/badlen")
    assert b"Content-Length: 100000" in out and len(out.partition(b"\r\n\r\n")[2]) == 1000
    assert len(raw(tb, "/hugeheaders").partition(b"\r\n\r\n")[0]) > 100_000


def test_generated_html(tb: TestbedProcess) -> None:
    async def fetch(path: str) -> bytes:
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"http://127.0.10.1:{tb.hostile_port}{path}", headers={"Host": "hostile.crawl.test"}) as r,
        ):
            return await r.read()

    many = asyncio.run(fetch("/manylinks"))
    assert many.count(b"<a href=") == 1_000_000 and many.endswith(b"</html>\n")
    nested = asyncio.run(fetch("/nested"))
    assert nested.count(b"<div>") == 100_000 == nested.count(b"</div>")
    bad = asyncio.run(fetch("/badutf8"))
    with pytest.raises(UnicodeDecodeError):
        bad.decode("utf-8")
    assert b"\x00" in bad


def test_raw_breakage(tb: TestbedProcess) -> None:
    assert raw(tb, "/rawbad/status").startswith(b"HTTP/1.1 2000 ")
    assert not raw(tb, "/rawbad/garbage").startswith(b"HTTP/")
    assert b"zz-not-hex" in raw(tb, "/rawbad/chunked") and b"zz-not-hex" in raw(tb, "/rawbad/latechunk")
    assert b"this line has no colon" in raw(tb, "/rawbad/header")
    assert raw(tb, "/rawbad/close") == b""
    for path, where in (("/ssrf-redirect", b"private.crawl.test"), ("/ip-redirect", b"127.0.0.53")):
        assert where in raw(tb, path)


def test_hostile_requests_logged(tb: TestbedProcess) -> None:
    raw(tb, "/rawbad/status")
    tb.wait_log_flush()
    assert any(
        x["host"] == "hostile.crawl.test" and x["path"] == "/rawbad/status" for x in tb.read_access_log()
    )


def test_hostile_off_by_default(testbed_small: TestbedProcess) -> None:
    r = DNSRecord.parse(
        DNSRecord.question("hostile.crawl.test").send("127.0.0.1", testbed_small.dns_port, timeout=2)
    )
    assert not r.rr and "hostile_port" not in testbed_small.info
