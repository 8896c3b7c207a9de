"""The live WARC is what went over the wire: a raw TCP server records the exact request bytes it got and
sends exact response bytes (odd header case and order, repeated headers, a redirect, a chunked body, a
gzip body); both fetchers archive through ``WarcWriter.write_exchange`` and the records read back with
warcio (digests checked) must hold those bytes. ``warcio check`` passes on the files. The same holds over
TLS (the server behind the testbed's own CA, trusted through ``fetch.tls_ca_bundle``): the records hold the
HTTP bytes inside the TLS stream."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from fetchers.aio import AioFetcher
from fetchers.h1 import H1Fetcher
from fetchers.testing import StaticResolver, run_urls
from fetchers.threaded import ThreadedFetcher
from pipeline.harness.testbed.tlscerts import make_pki
from pipeline.settings import Settings
from pipeline.storage.warc import WarcWriter
from pipeline.storage.warcinfo import crawl_info
from pipeline.urls import Scope

pytestmark = pytest.mark.integration
IP = "127.0.21.1"
UA = "TestBot/9.9 (+https://bot.example/about; ops@bot.example)"
PAGE = b"<html><body><a href='/gz'>gz</a></body></html>"
ZIPPED = gzip.compress(b"<html><body>" + b"zipped " * 200 + b"</body></html>", mtime=0)


def _reply(status: str, headers: list[str], body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode() + body


ROUTES: dict[bytes, bytes] = {
    b"/robots.txt": _reply("404 Not Found", ["content-length: 0"], b""),
    b"/start": _reply(
        "302 Found", ["LoCaTiOn: /final", "X-Dup: one", "Content-Length: 0", "x-dup: two", "Server: RawBed/1"], b""
    ),
    b"/final": _reply(
        "200 OK",
        ["Server: RawBed/1", "content-TYPE: text/html; charset=utf-8", "Transfer-Encoding: chunked", "X-Order: last"],
        f"{len(PAGE):x}\r\n".encode() + PAGE + b"\r\n0\r\n\r\n",
    ),
    b"/gz": _reply(
        "200 OK",
        ["Content-Type: text/html", "Content-Encoding: gzip", f"Content-Length: {len(ZIPPED)}", "Vary: Accept-Encoding"],
        ZIPPED,
    ),
}


class RawSite:
    """Records every request head byte for byte and answers from ROUTES byte for byte (keep-alive)."""

    def __init__(self, ssl: Any = None) -> None:
        self.requests: dict[bytes, list[bytes]] = {}
        self.port = 0
        self._ssl = ssl
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, IP, 0, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                target = head.split(b" ", 2)[1]
                self.requests.setdefault(target, []).append(head)
                writer.write(ROUTES.get(target, _reply("404 Not Found", ["Content-Length: 0"], b"")))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _records(files: list[Path]) -> Iterator[tuple[str, dict[str, str], bytes]]:
    """(type, WARC headers, block as stored); block and payload digests are checked on a first pass."""
    for path in files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests=True):
                rec.content_stream().read()
                assert rec.digest_checker.passed is not False, rec.digest_checker.problems
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, no_record_parse=True):
                yield rec.rec_type, dict(rec.rec_headers.headers), rec.raw_stream.read()


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("kind", [AioFetcher, ThreadedFetcher, H1Fetcher], ids=["aio", "threaded", "h1"])
def test_records_hold_the_exact_bytes(kind: type, scheme: str, tmp_path: Path) -> None:
    fetch: dict[str, Any] = {"retries": 0, "user_agent": UA}
    server_ssl = None
    if scheme == "https":  # the wildcard certificate names *.crawl.test; raw.test is served as raw.crawl.test
        pki = make_pki(tmp_path / "tls", 1)
        server_ssl, fetch["tls_ca_bundle"] = pki.server_context("wildcard"), str(pki.ca)
    host = "raw.crawl.test" if scheme == "https" else "raw.test"
    settings = Settings().with_overrides(
        {
            "security": {"allow_networks": ("127.0.21.0/24",)},
            "politeness": {"min_host_delay_s": 0.0},
            "fetch": fetch,
        }
    )
    site = RawSite(server_ssl)
    writer = WarcWriter(tmp_path / "warc", info=crawl_info(settings), prefix="wire")

    async def go() -> dict[str, Any]:
        await site.start()
        try:
            async with kind(
                settings, fetcher_id="w", resolver=StaticResolver({host: [IP]}),
                scope=Scope.build([], allowed_domains=(host,)), archive=writer.write_exchange,
            ) as f:  # fmt: skip
                res, _ = await run_urls(f, [f"{scheme}://{host}:{site.port}/start", f"{scheme}://{host}:{site.port}/gz"])
                return res
        finally:
            await site.stop()

    results = asyncio.run(go())
    writer.close()
    base = f"{scheme}://{host}:{site.port}"
    assert results[f"{base}/start"].final_url == f"{base}/final" and results[f"{base}/start"].ok
    assert results[f"{base}/gz"].body.startswith(b"<html><body>zipped")

    records = list(_records(writer.stats.files))
    assert records[0][0] == "warcinfo"
    info = records[0][2].decode()
    for field in ("software: crawlfleet/", f"http-header-user-agent: {UA}", "robots: obey",
                  "operator: +https://bot.example/about; ops@bot.example", "crawlfleet-settings: {"):  # fmt: skip
        assert field in info
    info_id = records[0][1]["WARC-Record-ID"]
    pairs: dict[str, dict[str, Any]] = {}
    by_id = {h["WARC-Record-ID"]: (t, h, b) for t, h, b in records}
    for rec_type, headers, block in records[1:]:
        assert headers["WARC-Warcinfo-ID"] == info_id and headers["WARC-IP-Address"] == IP
        if rec_type == "request":
            resp_type, resp_headers, resp_block = by_id[headers["WARC-Concurrent-To"]]
            assert resp_type == "response" and resp_headers["WARC-Target-URI"] == headers["WARC-Target-URI"]
            assert resp_headers["WARC-Date"] == headers["WARC-Date"]
            pairs[headers["WARC-Target-URI"]] = {"request": block, "response": resp_block}
    # robots.txt, each redirect hop and each page: one pair per exchange, no other
    assert sorted(pairs) == sorted(f"{base}{p.decode()}" for p in ROUTES)
    for path, raw in ROUTES.items():
        pair = pairs[f"{base}{path.decode()}"]
        assert site.requests[path] == [pair["request"]], path  # exactly the bytes the server got
        assert pair["response"] == raw, path  # exactly the bytes it sent
        assert f"User-Agent: {UA}\r\n".encode() in pair["request"]

    warcio = shutil.which("warcio") or str(Path(sys.executable).with_name("warcio"))
    check = subprocess.run([warcio, "check", "-v", *map(str, writer.stats.files)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
