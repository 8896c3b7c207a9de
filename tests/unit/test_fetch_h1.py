"""fetchers.h1 against a real local socket server that answers as scripted: keep-alive reuse, a keep-alive
connection the server closed tried once more on a new one, a body delimited by the end of the connection,
an interim 100 response, and bytes sent out of turn ending the connection."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fetchers.exchange import SEND_FENCE
from fetchers.h1 import H1Transport
from fetchers.report import LEASE_LAPSED
from pipeline.settings import load_settings

FETCH = load_settings(environ={}).fetch
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello"


async def _serve(answer: Callable[[int, int], bytes | None]) -> tuple[asyncio.Server, list[int]]:
    """A server whose ``answer(connection, request)`` bytes go back for each request head (None: close at
    once; an answer saying ``Connection: close`` closes after it)."""
    conns: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.append(0)
        index = len(conns) - 1
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                conns[index] += 1
                out = answer(index, conns[index])
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
                if b"Connection: close" in out:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, conns


def _run(answer: Callable[[int, int], bytes | None], n: int, *, between: float = 0.0) -> tuple[list, list[int]]:
    async def main() -> tuple[list, list[int]]:
        server, conns = await _serve(answer)
        port = server.sockets[0].getsockname()[1]
        transport = H1Transport(FETCH, asyncio.get_running_loop().time)
        out = []
        try:
            for _ in range(n):
                out.append(await transport.exchange(f"http://a.test:{port}/", "a.test", "127.0.0.1", max_body=1000))
                await asyncio.sleep(between)
        finally:
            transport.close()
            server.close()
        return out, conns

    return asyncio.run(main())


def test_a_keep_alive_connection_carries_every_request() -> None:
    got, conns = _run(lambda c, r: OK, 3)
    assert [(e.status, e.body, e.error_class) for e in got] == [(200, b"hello", "")] * 3
    assert conns == [3] and got[0].content_type == "text/html"


def test_a_kept_connection_the_server_closed_is_tried_once_more_on_a_new_one() -> None:
    # The first connection answers once, then closes when the second request arrives on it.
    got, conns = _run(lambda c, r: OK if r == 1 else None, 3, between=0.05)
    assert [(e.status, e.error_class) for e in got] == [(200, "")] * 3
    assert conns[0] == 2  # the second request went out on it and was not answered


def test_a_body_that_runs_to_the_end_of_the_connection() -> None:
    got, _ = _run(lambda c, r: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", 1)
    assert got[0].status == 200 and got[0].body == b"until the end" and not got[0].error_class


def test_an_interim_answer_is_skipped_and_a_short_body_is_incomplete() -> None:
    got, _ = _run(lambda c, r: b"HTTP/1.1 100 Continue\r\n\r\n" + OK, 1)
    assert got[0].status == 200 and got[0].body == b"hello"
    short = b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\nConnection: close\r\n\r\nhello"
    got, _ = _run(lambda c, r: short, 1)
    assert got[0].status == 200 and got[0].error_class == "incomplete_body" and got[0].body == b"hello"


def test_bytes_after_the_answer_end_the_connection() -> None:
    got, conns = _run(lambda c, r: OK + b"HTTP/1.1 200 OK\r\n", 2, between=0.05)
    assert [(e.status, e.error_class) for e in got] == [(200, "")] * 2
    assert len(conns) == 2  # the second request could not use the first connection


def test_a_fence_that_closes_while_connecting_sends_nothing() -> None:
    # The batch's fence passed before the request (fetchers.retrying), then the process was stopped while
    # its new connection was being made: once connected the fence says no, and no request goes out (the
    # URL goes back unfetched; another node may hold it by now). A reused connection sends at once.
    async def main() -> tuple[list, list[int]]:
        server, conns = await _serve(lambda _c, _r: OK)
        port = server.sockets[0].getsockname()[1]
        transport = H1Transport(FETCH, asyncio.get_running_loop().time)
        url = f"http://a.test:{port}/"
        out = []
        try:
            for allowed in (False, True, True):
                token = SEND_FENCE.set(lambda a=allowed: a)  # type: ignore[misc]
                try:
                    out.append(await transport.exchange(url, "a.test", "127.0.0.1", max_body=1000))
                finally:
                    SEND_FENCE.reset(token)
                await asyncio.sleep(0.05)
        finally:
            transport.close()
            server.close()
        return out, conns

    (lapsed, first, reused), conns = asyncio.run(main())
    assert lapsed.error_class == LEASE_LAPSED and lapsed.status == 0
    assert (first.status, reused.status) == (200, 200) and sum(conns) == 2 and len(conns) == 1
