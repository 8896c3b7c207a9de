"""The aiohttp and requests transports ask the batch's fence (``fetchers.exchange.SEND_FENCE``) again once a
new connection is up, against a real local socket server: a process stopped while connecting must not,
once it continues, send a request its batch no longer allows. Fenced, the exchange ends as
``LEASE_LAPSED`` and the server sees no request bytes on that connection; aiohttp keeps the connection
for the next request, urllib3 closes it (``fetchers.threaded`` says why). Over HTTPS the same, the fence
asked once the TLS handshake is done (the server is the testbed's, behind its own CA). The h1 transport's
own test is in test_fetch_h1.py."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp.abc import ResolveResult

from fetchers.aio import AioFetcher
from fetchers.exchange import SEND_FENCE, Exchange
from fetchers.guard import GuardedResolver
from fetchers.report import LEASE_LAPSED
from fetchers.threaded import ThreadedFetcher
from pipeline.harness.testbed.tlscerts import make_pki
from pipeline.settings import Settings, load_settings

SETTINGS = load_settings(environ={})
NAME = "site2.crawl.test"  # the testbed CA's wildcard certificate names it
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello"

Exchanger = Callable[[str], Awaitable[Exchange]]


class _Loopback(aiohttp.abc.AbstractResolver):
    """Every name is 127.0.0.1 (the https URL names a host the certificate covers)."""

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        return [ResolveResult(hostname=host, host="127.0.0.1", port=port, family=socket.AF_INET, proto=0,
                              flags=socket.AI_NUMERICHOST)]  # fmt: skip

    async def close(self) -> None:
        pass


async def _serve(tls: ssl.SSLContext | None = None) -> tuple[asyncio.Server, list[list[bytes]]]:
    """Answers OK to every request head; ``seen[c]`` is every byte chunk connection ``c`` received."""
    seen: list[list[bytes]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got: list[bytes] = []
        seen.append(got)
        buf = b""
        try:
            while chunk := await reader.read(65536):
                got.append(chunk)
                buf += chunk
                while b"\r\n\r\n" in buf:
                    _, _, buf = buf.partition(b"\r\n\r\n")
                    writer.write(OK)
                    await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls), seen


async def _fenced_then_allowed(exchange: Exchanger, url: str) -> list[Exchange]:
    """A first exchange whose fence says no once connected (the engine's check before it passed), then two
    it allows."""
    out = []
    for allowed in (False, True, True):
        token = SEND_FENCE.set(lambda a=allowed: a)  # type: ignore[misc]
        try:
            out.append(await exchange(url))
        finally:
            SEND_FENCE.reset(token)
    return out


Opener = Callable[[Settings], AioFetcher | ThreadedFetcher]


def _run(open_fetcher: Opener, tls_dir: Path | None = None) -> tuple[list[Exchange], list[bytes]]:
    """The three exchanges against a real server (over TLS when ``tls_dir``: a testbed CA made there)."""
    pki = make_pki(tls_dir, 3) if tls_dir is not None else None
    settings = SETTINGS
    if pki is not None:
        settings = load_settings(environ={}, overrides={"fetch": {"tls_ca_bundle": str(pki.ca)}})

    async def main() -> tuple[list[Exchange], list[bytes]]:
        server, seen = await _serve(pki.server_context("wildcard") if pki else None)
        port = server.sockets[0].getsockname()[1]
        fetcher = open_fetcher(settings)
        guard = GuardedResolver(_Loopback() if pki else aiohttp.ThreadedResolver(), ("127.0.0.0/8",))
        transport = fetcher._open_transport(guard)
        host = f"{NAME if pki else '127.0.0.1'}:{port}"
        try:
            out = await _fenced_then_allowed(
                lambda url: transport.exchange(url, host, "127.0.0.1", max_body=1000),
                f"{'https' if pki else 'http'}://{host}/")  # fmt: skip
        finally:
            await fetcher._close_transport()
            await guard.close()
            server.close()
            await server.wait_closed()
        return out, [b"".join(chunks) for chunks in seen]

    return asyncio.run(main())


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_aio_fenced_once_connected_sends_nothing_and_keeps_the_connection(scheme: str, tmp_path: Path) -> None:
    (lapsed, first, reused), conns = _run(lambda s: AioFetcher(s, fetcher_id="t"),
                                          tmp_path if scheme == "https" else None)  # fmt: skip
    assert lapsed.error_class == LEASE_LAPSED and lapsed.status == 0 and not lapsed.retryable
    assert (first.status, first.body, reused.status) == (200, b"hello", 200)
    assert len(conns) == 1  # the fenced exchange's connection carried the two allowed requests
    assert conns[0].count(b"GET / HTTP/1.1\r\n") == 2


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_threaded_fenced_once_connected_sends_nothing_and_closes_the_connection(scheme: str, tmp_path: Path) -> None:
    (lapsed, first, reused), conns = _run(lambda s: ThreadedFetcher(s, fetcher_id="t", threads=2),
                                          tmp_path if scheme == "https" else None)  # fmt: skip
    assert lapsed.error_class == LEASE_LAPSED and lapsed.status == 0 and not lapsed.retryable
    assert (first.status, first.body, reused.status) == (200, b"hello", 200)
    assert conns[0] == b""  # connected, then closed without a byte of request
    assert len(conns) == 2 and conns[1].count(b"GET / HTTP/1.1\r\n") == 2  # the next one is kept alive
