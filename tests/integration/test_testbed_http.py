"""The real testbed server over real sockets: routing, specials, access log, shutdown flush."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import zstandard
from aiohttp.abc import ResolveResult

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.model import ip_for_host

pytestmark = pytest.mark.integration


class _Resolver(aiohttp.abc.AbstractResolver):
    """Resolves *.crawl.test through the testbed's own DNS server (dnslib client)."""

    def __init__(self, dns_port: int) -> None:
        self.dns_port = dns_port

    async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[ResolveResult]:
        from dnslib import DNSRecord

        q = DNSRecord.question(host)
        raw = await asyncio.get_running_loop().run_in_executor(
            None, lambda: q.send("127.0.0.1", self.dns_port, timeout=2)
        )
        reply = DNSRecord.parse(raw)
        ip = str(reply.rr[0].rdata)
        return [ResolveResult(hostname=host, host=ip, port=port, family=socket.AF_INET, proto=0, flags=0)]

    async def close(self) -> None:
        pass


async def _get(tb: TestbedProcess, url: str, **kw: Any) -> tuple[int, dict[str, str], bytes, list[str]]:
    conn = aiohttp.TCPConnector(resolver=_Resolver(tb.dns_port))
    async with aiohttp.ClientSession(connector=conn) as s, s.get(url, **kw) as r:
        body = await r.read()
        return r.status, dict(r.headers), body, [str(h.url) for h in r.history]


def get(tb: TestbedProcess, url: str, **kw: Any) -> tuple[int, dict[str, str], bytes, list[str]]:
    return asyncio.run(_get(tb, url, **kw))


@pytest.fixture(scope="module", params=["fast", "aiohttp"])
def tb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    workdir = tmp_path_factory.mktemp(f"tb_http_{request.param}")
    with TestbedProcess(20, 50, seed=0, engine=request.param, workdir=workdir) as t:
        yield t


def test_ready_file(tb: TestbedProcess) -> None:
    assert len(tb.seeds) == 20 and tb.seeds[3] == f"http://site3.crawl.test:{tb.port}/"
    assert "127.0.10.1" in tb.ips and "0.0.0.0" not in tb.ips
    assert tb.info["host_ips"]["site7.crawl.test"] == ip_for_host(7, 20)


def test_pages_match_model_and_host_routing(tb: TestbedProcess) -> None:
    from pipeline.harness.testbed.render import Renderer

    r = Renderer(tb.web)
    status, headers, body, _ = get(tb, tb.url(3, "/p/7"))
    assert status == 200 and body == r.reply(3, "/p/7").body
    assert headers["Content-Type"].startswith("text/html")
    # same address, other host -> other page; uppercase Host and any port work
    ip = ip_for_host(3, 20)
    status, _, body2, _ = get(tb, f"http://{ip}:{tb.port}/p/7", headers={"Host": "SITE3.Crawl.Test:1"})
    assert body2 == body
    status, _, _, _ = get(tb, f"http://{ip}:{tb.port}/", headers={"Host": "nosuch.crawl.test"})
    assert status == 404


def test_redirect_chain_and_loop(tb: TestbedProcess) -> None:
    status, _, body, history = get(tb, tb.url(0, "/r/1"))
    assert status == 200 and history == [tb.url(0, "/r/1"), tb.url(0, "/r2/1")]
    status, headers, _, _ = get(tb, tb.url(0, "/r/1"), allow_redirects=False)
    assert status == 301 and headers["Location"] == tb.url(0, "/r2/1")
    with pytest.raises(aiohttp.TooManyRedirects):
        get(tb, tb.url(0, "/loop/a"), max_redirects=6)


def test_status_pages_and_specials(tb: TestbedProcess) -> None:
    assert get(tb, tb.url(1, "/missing/0"))[0] == 404
    assert get(tb, tb.url(1, "/error/0"))[0] == 500
    assert get(tb, tb.url(3, "/nothing-here"))[0] == 404
    status, headers, body, _ = get(tb, tb.url(4, "/gzip"), auto_decompress=False)
    assert headers["Content-Encoding"] == "gzip" and b"<html>" in gzip.decompress(body)
    status, headers, body, _ = get(tb, tb.url(5, "/big"))
    assert status == 200 and len(body) >= 5 * 1024 * 1024
    status, headers, body, _ = get(tb, tb.url(5, "/file.bin"))
    assert headers["Content-Type"] == "application/octet-stream" and len(body) == 100 * 1024
    status, headers, body, _ = get(tb, tb.url(6, "/latin1"))
    assert "iso-8859-1" in headers["Content-Type"] and "Café".encode("latin-1") in body
    status, _, body, _ = get(tb, tb.url(2, "/robots.txt"))
    assert status == 200 and b"User-agent: crawlfleet" in body
    assert get(tb, tb.url(0, "/robots.txt"))[0] == 404


def test_access_log_records_requests(tb: TestbedProcess) -> None:
    get(tb, tb.url(9, "/p/11?x=1"), headers={"Host": f"SITE9.crawl.test:{tb.port}", "User-Agent": "probe pid/7"})
    tb.flush_log()  # a flush request: the line is on disk when it is answered, no timer waited for
    lines = [x for x in tb.read_access_log() if x["host"] == "site9.crawl.test" and x["path"] == "/p/11?x=1"]
    assert len(lines) == 1
    assert lines[0]["status"] == 404 and lines[0]["client"] == "127.0.0.1" and lines[0]["t"] > 1e9
    assert lines[0]["ua"] == "probe pid/7" and lines[0]["end"] >= lines[0]["t"]
    assert not [x for x in tb.read_access_log() if x["host"] == "flush.invalid"]  # flushes are not logged


def test_a_slow_reply_is_logged_with_its_span_and_a_client_gone_as_499(tb: TestbedProcess) -> None:
    """Start and end of a request as the server saw them: /slow is answered 1.5 s after its head arrived;
    a client that leaves before the answer is logged with nginx's 499 once the server finds it gone."""
    status = get(tb, tb.url(4, "/slow"), headers={"User-Agent": "slow-probe"})[0]
    with socket.create_connection((ip_for_host(4, tb.hosts), tb.port), timeout=10) as s:
        s.sendall(b"GET /slow HTTP/1.1\r\nHost: site4.crawl.test\r\nUser-Agent: leaver\r\n\r\n")
    assert status == 200

    def logged() -> list[dict[str, Any]]:
        tb.flush_log()
        return [x for x in tb.read_access_log() if x["path"] == "/slow" and x["ua"] in ("slow-probe", "leaver")]

    deadline = time.monotonic() + 60  # a bound on the wait, not a verdict
    while len(logged()) < 2 and time.monotonic() < deadline:  # the leaver's line comes once it is found gone
        time.sleep(0.1)
    by_ua = {x["ua"]: x for x in logged()}
    assert by_ua["slow-probe"]["status"] == 200 and by_ua["slow-probe"]["end"] - by_ua["slow-probe"]["t"] >= 1.4
    assert by_ua["leaver"]["status"] in (200, 499)  # 499 unless the kernel took the reply before the close


def test_sigterm_flushes_access_log(make_testbed: Any) -> None:
    t = make_testbed(3, 5)
    for m in range(4):
        get(t, t.url(1, t.web.page_path(m)))
    assert t.stop() == 0  # immediately: before the periodic flush could run
    paths = [x["path"] for x in t.read_access_log() if x["host"] == "site1.crawl.test"]
    assert paths == ["/", "/p/0", "/p/1", "/p/2"]
    raw = t.access_log.read_text().splitlines()
    assert all(json.loads(line) for line in raw)


def _raw(tb: TestbedProcess, data: bytes, *, ip: str = "127.0.10.1") -> bytes:
    """Send raw bytes, read until the server closes the connection."""
    with socket.create_connection((ip, tb.port), timeout=10) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_pipelining_keepalive_head_and_close(tb: TestbedProcess) -> None:
    host = f"site0.crawl.test:{tb.port}"
    req = (
        f"GET /p/1 HTTP/1.1\r\nHost: {host}\r\n\r\n"
        f"HEAD /p/2 HTTP/1.1\r\nHost: {host}\r\n\r\n"
        f"GET /missing/0 HTTP/1.1\r\nHost: site1.crawl.test\r\nConnection: close\r\n\r\n"
    ).encode()
    out = _raw(tb, req)
    assert out.count(b"HTTP/1.1 200") == 2 and out.count(b"HTTP/1.1 404") == 1
    assert out.index(b"HTTP/1.1 404") > out.rindex(b"HTTP/1.1 200")  # in order
    # HTTP/1.0 closes by default
    out = _raw(tb, f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
    assert out.startswith(b"HTTP/1.") and b" 200 " in out.split(b"\r\n")[0]


def test_junk_request_gets_400(tb: TestbedProcess) -> None:
    out = _raw(tb, b"NONSENSE\r\n\r\n")
    assert b" 400 " in out.split(b"\r\n")[0]


def test_slow_page_does_not_block_others(tb: TestbedProcess) -> None:
    async def both() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        slow = asyncio.ensure_future(_get(tb, tb.url(4, "/slow")))
        fast = await _get(tb, tb.url(4, "/p/1"))
        t_fast = loop.time() - t0
        assert fast[0] == 200
        assert (await slow)[0] == 200
        return t_fast, loop.time() - t0

    t_fast, t_slow = asyncio.run(both())
    assert t_slow >= 1.4  # the contract of /slow, not a performance assertion


def test_workers_share_the_sockets(make_testbed: Any) -> None:
    t = make_testbed(6, 10, workers=2)
    urls = [t.url(i, t.web.page_path(m)) for i in range(6) for m in range(10)]

    async def fetch_all() -> list[int]:
        conn = aiohttp.TCPConnector(resolver=_Resolver(t.dns_port), force_close=True)
        async with aiohttp.ClientSession(connector=conn) as s:

            async def one(u: str) -> int:
                async with s.get(u) as r:
                    await r.read()
                    return r.status

            return await asyncio.gather(*(one(u) for u in urls))

    assert set(asyncio.run(fetch_all())) == {200}
    t.flush_log()  # a flush request reaches every serving process
    logged = [x for x in t.read_access_log() if x["host"].startswith("site")]
    assert len(logged) == len(urls)
    assert t.stop() == 0
    assert len([x for x in t.read_access_log() if x["host"].startswith("site")]) == len(urls)


def test_gzip_pages_option(make_testbed: Any) -> None:
    t = make_testbed(3, 4, extra_args=("--gzip-pages",))
    status, headers, body, _ = get(
        t, t.url(1, "/p/1"), auto_decompress=False, headers={"Accept-Encoding": "gzip"}
    )
    assert headers["Content-Encoding"] == "gzip" and b"/p/2" in gzip.decompress(body)
    status, headers, body, _ = get(
        t, t.url(1, "/p/1"), auto_decompress=False, headers={"Accept-Encoding": "identity"}
    )
    assert "Content-Encoding" not in headers and b"/p/2" in body


def test_zstd_pages_option(make_testbed: Any) -> None:
    t = make_testbed(3, 4, extra_args=("--gzip-pages", "--zstd-pages"))
    status, headers, body, _ = get(
        t, t.url(1, "/p/1"), auto_decompress=False, headers={"Accept-Encoding": "gzip, deflate, br, zstd"}
    )
    assert headers["Content-Encoding"] == "zstd" and b"/p/2" in zstandard.ZstdDecompressor().decompress(body)
    status, headers, body, _ = get(t, t.url(1, "/p/1"), auto_decompress=False, headers={"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip"
