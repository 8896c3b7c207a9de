"""The delaying TCP/UDP forwarder (pipeline/harness/faults/netproxy.py), on loopback sockets.

Delays are checked as an order of events on a loop whose clock moves only when the test says so
(tests/manual_clock.py): nothing arrives until the proxy's clock has passed the delay, so no test
depends on how busy the machine is.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable

import pytest

from pipeline.harness.faults.netproxy import ProxyProcess, Route, start, stop
from tests.manual_clock import ManualClockLoop, run_manual


def test_route_parse_and_spec_round_trip() -> None:
    r = Route.parse("tcp:10.1.2.1:0:127.0.0.1:9090:10")
    assert (r.proto, r.listen_host, r.listen_port, r.target_host, r.target_port) == ("tcp", "10.1.2.1", 0, "127.0.0.1", 9090)
    assert (r.up_s, r.down_s) == (0.01, 0.0)
    assert Route.parse(r.spec()) == r
    assert Route.parse("udp:127.0.0.1:53:127.0.0.1:5353:1.5:2").down_s == 0.002
    for bad in ("tcp:1:2", "sctp:a:1:b:2", "tcp:a:1:b:2:-1", "tcp:a:x:b:2"):
        with pytest.raises(ValueError):
            Route.parse(bad)


async def _echo_server(*, close_after_eof: bool = True) -> tuple[asyncio.Server, int]:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
        if close_after_eof:
            w.write(b"<eof>")
            await w.drain()
        w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


def run(coro: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(coro(), 30))


def test_tcp_relays_bytes_in_order_both_ways_and_passes_eof_on() -> None:
    async def main() -> None:
        server, port = await _echo_server()
        bounds = await start([Route("tcp", "127.0.0.1", 0, "127.0.0.1", port)])
        payload = os.urandom(3_000_000)
        try:
            r, w = await asyncio.open_connection("127.0.0.1", bounds[0].port)

            async def send() -> None:
                for i in range(0, len(payload), 100_000):
                    w.write(payload[i : i + 100_000])
                    await w.drain()
                w.write_eof()  # the echo server answers <eof> only after it sees ours

            sender = asyncio.create_task(send())
            got = await r.read(-1)  # until the proxy passes the server's close on
            await sender
            assert got == payload + b"<eof>"
            w.close()
            await asyncio.sleep(0.05)  # the forwarder counts a connection when both directions ended
            stats = bounds[0].stats
            assert stats.connections == 1 and stats.bytes_up == len(payload)
            assert stats.bytes_down == len(payload) + 5
        finally:
            await stop(bounds)
            server.close()

    run(main)


def test_tcp_delay_is_added_to_each_round_trip_and_a_refused_target_closes_the_client() -> None:
    async def main(loop: ManualClockLoop) -> None:
        server, port = await _echo_server()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead_port = s.getsockname()[1]  # nothing listens there once closed
        bounds = await start([Route("tcp", "127.0.0.1", 0, "127.0.0.1", port, up_s=0.05, down_s=0.03),
                              Route("tcp", "127.0.0.1", 0, "127.0.0.1", dead_port)])  # fmt: skip
        try:
            r, w = await asyncio.open_connection("127.0.0.1", bounds[0].port)
            for _ in range(3):
                w.write(b"ping")
                await w.drain()
                echo = asyncio.ensure_future(r.readexactly(4))
                await loop.idle()
                assert not echo.done()  # held on the way up: the proxy's clock has not moved
                loop.advance(0.05)
                await loop.idle()
                assert not echo.done()  # up, echoed, and held on the way down
                loop.advance(0.03)
                assert await echo == b"ping"
            w.close()
            r2, w2 = await asyncio.open_connection("127.0.0.1", bounds[1].port)
            assert await r2.read(-1) == b""
            w2.close()
            assert bounds[1].stats.refused == 1
            # The forwarder still serves after a refusal.
            r3, w3 = await asyncio.open_connection("127.0.0.1", bounds[0].port)
            w3.write(b"again")
            again = asyncio.ensure_future(r3.readexactly(5))
            while not again.done():
                loop.advance(0.05)
                await loop.idle(0.02)
            assert again.result() == b"again"
            w3.close()
        finally:
            await stop(bounds)
            server.close()

    run_manual(main)


def test_udp_datagrams_go_to_the_target_and_replies_come_back_from_the_listening_address() -> None:
    async def main(loop: ManualClockLoop) -> None:

        class Echo(asyncio.DatagramProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.t = transport

            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                self.t.sendto(b"re:" + data, addr)  # type: ignore[attr-defined]

        echo_t, _ = await loop.create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
        target = echo_t.get_extra_info("sockname")[1]
        bounds = await start([Route("udp", "127.0.0.1", 0, "127.0.0.1", target, up_s=0.02)])
        got: asyncio.Queue[tuple[bytes, tuple[str, int]]] = asyncio.Queue()

        class Client(asyncio.DatagramProtocol):
            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                got.put_nowait((data, addr))

        client_t, _ = await loop.create_datagram_endpoint(Client, local_addr=("127.0.0.1", 0))
        try:
            for i in range(3):
                client_t.sendto(f"q{i}".encode(), ("127.0.0.1", bounds[0].port))
            await loop.idle()
            assert got.empty()  # held: the proxy's clock has not passed up_s
            loop.advance(0.02)
            answers = [await got.get() for _ in range(3)]
            assert sorted(a for a, _ in answers) == [b"re:q0", b"re:q1", b"re:q2"]
            assert {addr for _, addr in answers} == {("127.0.0.1", bounds[0].port)}
            assert bounds[0].stats.datagrams_up == 3 and bounds[0].stats.datagrams_down == 3
        finally:
            client_t.close()
            await stop(bounds)
            echo_t.close()

    run_manual(main)


def test_proxy_process_reports_its_ports_and_counters() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        proxy = ProxyProcess([Route("tcp", "127.0.0.1", 0, "127.0.0.1", port, up_s=0.001)])
        try:
            (pport,) = proxy.start()
            with socket.create_connection(("127.0.0.1", pport), timeout=10) as c:
                conn, _ = srv.accept()
                with conn:
                    c.sendall(b"hello")
                    assert conn.recv(5) == b"hello"
                    conn.sendall(b"world!")
                    assert c.recv(6) == b"world!"
        finally:
            stats = proxy.stop()
    assert len(stats) == 1
    assert stats[0]["connections"] == 1 and stats[0]["bytes_up"] == 5 and stats[0]["bytes_down"] == 6
    assert stats[0]["route"].startswith("tcp:127.0.0.1:0:127.0.0.1:")


def test_a_reset_client_ends_the_connection_to_the_target() -> None:
    async def main() -> None:
        ended: asyncio.Queue[bytes] = asyncio.Queue()

        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            got = b""
            try:
                while data := await r.read(65536):
                    got += data
            except ConnectionError:
                pass
            ended.put_nowait(got)
            w.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        bounds = await start([Route("tcp", "127.0.0.1", 0, "127.0.0.1", int(server.sockets[0].getsockname()[1]),
                                    up_s=0.01)])  # fmt: skip
        try:
            sock = socket.create_connection(("127.0.0.1", bounds[0].port))
            sock.sendall(b"before the reset")
            await asyncio.sleep(0.1)  # let the proxy read it before the RST discards unread data
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            sock.close()  # linger 0: an RST, not a FIN
            assert await ended.get() == b"before the reset"  # the target's side ended too (no hang)
        finally:
            await stop(bounds)
            server.close()

    run(main)
