"""The aiohttp and requests transports ask the batch's fence (``fetchers.exchange.SEND_FENCE``) again once a
new connection is up, against a real local socket server: a process stopped while connecting must not,
once it continues, send a request its batch no longer allows. Fenced, the exchange ends as
``LEASE_LAPSED`` and the server sees no request bytes on that connection; aiohttp keeps the connection
for the next request, urllib3 closes it (``fetchers.threaded`` says why). The h1 transport's own test is
in test_fetch_h1.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp

from fetchers.aio import AioFetcher
from fetchers.exchange import SEND_FENCE, Exchange
from fetchers.guard import GuardedResolver
from fetchers.report import LEASE_LAPSED
from fetchers.threaded import ThreadedFetcher
from pipeline.settings import load_settings

SETTINGS = load_settings(environ={})
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello"

Exchanger = Callable[[str], Awaitable[Exchange]]


async def _serve() -> tuple[asyncio.Server, list[list[bytes]]]:
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

    return await asyncio.start_server(handle, "127.0.0.1", 0), seen


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


def _run(open_fetcher: Callable[[], AioFetcher | ThreadedFetcher]) -> tuple[list[Exchange], list[bytes]]:
    async def main() -> tuple[list[Exchange], list[bytes]]:
        server, seen = await _serve()
        port = server.sockets[0].getsockname()[1]
        fetcher = open_fetcher()
        guard = GuardedResolver(aiohttp.ThreadedResolver(), ("127.0.0.0/8",))
        transport = fetcher._open_transport(guard)
        try:
            out = await _fenced_then_allowed(
                lambda url: transport.exchange(url, f"127.0.0.1:{port}", "127.0.0.1", max_body=1000),
                f"http://127.0.0.1:{port}/")  # fmt: skip
        finally:
            await fetcher._close_transport()
            await guard.close()
            server.close()
            await server.wait_closed()
        return out, [b"".join(chunks) for chunks in seen]

    return asyncio.run(main())


def test_aio_fenced_once_connected_sends_nothing_and_keeps_the_connection() -> None:
    (lapsed, first, reused), conns = _run(lambda: AioFetcher(SETTINGS, fetcher_id="t"))
    assert lapsed.error_class == LEASE_LAPSED and lapsed.status == 0 and not lapsed.retryable
    assert (first.status, first.body, reused.status) == (200, b"hello", 200)
    assert len(conns) == 1  # the fenced exchange's connection carried the two allowed requests
    assert conns[0].count(b"GET / HTTP/1.1\r\n") == 2


def test_threaded_fenced_once_connected_sends_nothing_and_closes_the_connection() -> None:
    (lapsed, first, reused), conns = _run(lambda: ThreadedFetcher(SETTINGS, fetcher_id="t", threads=2))
    assert lapsed.error_class == LEASE_LAPSED and lapsed.status == 0 and not lapsed.retryable
    assert (first.status, first.body, reused.status) == (200, b"hello", 200)
    assert conns[0] == b""  # connected, then closed without a byte of request
    assert len(conns) == 2 and conns[1].count(b"GET / HTTP/1.1\r\n") == 2  # the next one is kept alive
