"""A TCP and UDP forwarder with an optional added one-way delay: the network between fleet processes.

This kernel has no netem, so latency between a fetch node (or a link job) and a service is added in
user space, by a forwarder in the path. It also carries traffic across a network-namespace boundary:
a service that listens on loopback only (RabbitMQ, HBase Thrift, the testbed's DNS) is reached from
a namespace through a forwarder that listens on the bridge address (``scripts/netns.sh``).

Contracts:

- **TCP**: each accepted connection opens one connection to the target, and bytes are relayed in
  order both ways. A half-close (EOF) is passed on after the bytes before it. A target that refuses
  closes the client's connection; the forwarder keeps serving.
- **Delay** (``up_s``: client to target, ``down_s``: target to client): every chunk read on one side
  is written to the other no sooner than the delay after it was read. Chunks do not wait for each
  other's delays, so it is latency, not a bandwidth limit (as netem's ``delay``). A round trip
  through the forwarder gains ``up_s + down_s``. At most ``MAX_QUEUED`` chunks wait per direction
  (back-pressure on the sender beyond that).
- **UDP**: each client address gets its own socket towards the target (at most ``MAX_UDP_CLIENTS``,
  the oldest dropped); replies go back from the listening address, with the same delays.

``serve`` runs routes in this process (asyncio); ``python -m pipeline.harness.faults.netproxy ROUTE...``
runs them in a process of their own (print one JSON line with the bound ports, serve until SIGTERM
or SIGINT, print the counters); ``ProxyProcess`` starts and stops that process. A route is written
``PROTO:LISTEN_HOST:LISTEN_PORT:TARGET_HOST:TARGET_PORT[:UP_MS[:DOWN_MS]]`` (IPv4; port 0 = a free
one), e.g. ``tcp:10.231.5.1:0:127.0.0.1:9090:10``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import signal
import subprocess
import sys
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

CHUNK = 65_536
MAX_QUEUED = 256
MAX_UDP_CLIENTS = 1024


@dataclass(frozen=True, slots=True)
class Route:
    """Listen on ``listen_host:listen_port`` and forward to ``target_host:target_port``."""

    proto: str  # "tcp" | "udp"
    listen_host: str
    listen_port: int
    target_host: str
    target_port: int
    up_s: float = 0.0
    down_s: float = 0.0

    def __post_init__(self) -> None:
        if self.proto not in ("tcp", "udp"):
            raise ValueError(f"proto must be tcp or udp, got {self.proto!r}")
        if self.up_s < 0 or self.down_s < 0:
            raise ValueError("delays must be >= 0")

    @classmethod
    def parse(cls, text: str) -> Route:
        """``PROTO:LHOST:LPORT:THOST:TPORT[:UP_MS[:DOWN_MS]]``; ValueError on anything else."""
        parts = text.split(":")
        if not 5 <= len(parts) <= 7:
            raise ValueError(f"route {text!r}: expected PROTO:LHOST:LPORT:THOST:TPORT[:UP_MS[:DOWN_MS]]")
        delays = [float(x) / 1000.0 for x in parts[5:]] + [0.0, 0.0]
        return cls(parts[0], parts[1], int(parts[2]), parts[3], int(parts[4]), delays[0], delays[1])

    def spec(self) -> str:
        return (f"{self.proto}:{self.listen_host}:{self.listen_port}:{self.target_host}:{self.target_port}"
                f":{self.up_s * 1000:g}:{self.down_s * 1000:g}")  # fmt: skip


@dataclass(slots=True)
class RouteStats:
    """Counters of one route since it started."""

    connections: int = 0
    refused: int = 0
    datagrams_up: int = 0
    datagrams_down: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


@dataclass(slots=True)
class Bound:
    """A running route: the port it got and its counters."""

    route: Route
    port: int
    stats: RouteStats = field(default_factory=RouteStats)
    server: Any = None  # asyncio.Server (tcp) or DatagramTransport (udp)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)  # live TCP connections

    def info(self) -> dict[str, Any]:
        return {"route": self.route.spec(), "port": self.port, **asdict(self.stats)}


# --- TCP ---------------------------------------------------------------------------------------------
async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float,
                count: list[int]) -> None:  # fmt: skip
    """Relay ``reader`` to ``writer`` until EOF, each chunk ``delay_s`` after it was read. A reset on the
    reading side raises ConnectionResetError here (after the chunks before it), ending the connection."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue(MAX_QUEUED)

    async def pump() -> None:
        while True:
            try:
                data: bytes | None = await reader.read(CHUNK)
            except (ConnectionError, OSError):
                data = None  # a reset: passed on in order, not as an EOF
            await queue.put((loop.time() + delay_s, data))
            if not data:
                return

    task = asyncio.create_task(pump())
    try:
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:
                raise ConnectionResetError("the other side reset the connection")
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            count[0] += len(data)
            writer.write(data)
            await writer.drain()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
            await task


async def _serve_tcp(bound: Bound, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    route, stats = bound.route, bound.stats
    me = asyncio.current_task()
    assert me is not None
    bound.tasks.add(me)
    up, down = [0], [0]
    pipes: list[asyncio.Task[None]] = []
    up_writer: asyncio.StreamWriter | None = None
    try:
        try:
            up_reader, up_writer = await asyncio.open_connection(route.target_host, route.target_port)
        except OSError:
            stats.refused += 1
            return
        stats.connections += 1
        pipes = [asyncio.create_task(_pipe(reader, up_writer, route.up_s, up)),
                 asyncio.create_task(_pipe(up_reader, writer, route.down_s, down))]  # fmt: skip
        # Both directions to their EOF; a reset on either side ends both.
        await asyncio.wait(pipes, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:
        pass  # the forwarder is stopping: close both ends below (this task is the connection's top)
    finally:
        for task in pipes:
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)
        stats.bytes_up += up[0]
        stats.bytes_down += down[0]
        for w in (writer, up_writer):
            if w is not None:
                w.close()
                with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
                    await w.wait_closed()
        bound.tasks.discard(me)


# --- UDP ---------------------------------------------------------------------------------------------
class _Upstream(asyncio.DatagramProtocol):
    """One client's socket towards the target; replies go back through the listening socket."""

    def __init__(self, front: _Front, client: tuple[str, int]) -> None:
        self.front, self.client = front, client

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        front = self.front
        front.bound.stats.datagrams_down += 1
        front.bound.stats.bytes_down += len(data)
        front.later(front.bound.route.down_s, front.reply, data, self.client)


class _Front(asyncio.DatagramProtocol):
    def __init__(self, bound: Bound) -> None:
        self.bound = bound
        self.transport: asyncio.DatagramTransport | None = None
        self.upstreams: OrderedDict[tuple[str, int], asyncio.Future[asyncio.DatagramTransport]] = OrderedDict()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a datagram transport, not its subclass

    @staticmethod
    def later(delay_s: float, fn: Any, *args: Any) -> None:
        loop = asyncio.get_running_loop()
        if delay_s > 0:
            loop.call_later(delay_s, fn, *args)
        else:
            fn(*args)

    def reply(self, data: bytes, client: tuple[str, int]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(data, client)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.bound.stats.datagrams_up += 1
        self.bound.stats.bytes_up += len(data)
        self.later(self.bound.route.up_s, self._forward, data, addr)

    def _forward(self, data: bytes, client: tuple[str, int]) -> None:
        fut = self.upstreams.get(client)
        if fut is None:
            fut = self.upstreams[client] = asyncio.ensure_future(self._open(client))
            while len(self.upstreams) > MAX_UDP_CLIENTS:
                _, old = self.upstreams.popitem(last=False)
                old.add_done_callback(_close_upstream)
        fut.add_done_callback(lambda f: _send_upstream(f, data))

    async def _open(self, client: tuple[str, int]) -> asyncio.DatagramTransport:
        route = self.bound.route
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: _Upstream(self, client), remote_addr=(route.target_host, route.target_port))
        return transport

    def close(self) -> None:
        for fut in self.upstreams.values():
            _close_upstream(fut)
        if self.transport is not None:
            self.transport.close()


def _send_upstream(fut: asyncio.Future[asyncio.DatagramTransport], data: bytes) -> None:
    if not fut.cancelled() and fut.exception() is None:
        fut.result().sendto(data)


def _close_upstream(fut: asyncio.Future[asyncio.DatagramTransport]) -> None:
    if fut.done() and not fut.cancelled() and fut.exception() is None:
        fut.result().close()


# --- running routes ----------------------------------------------------------------------------------
async def start(routes: list[Route]) -> list[Bound]:
    """Bind every route (in order) and start serving; ``stop`` closes them."""
    loop = asyncio.get_running_loop()
    out: list[Bound] = []
    try:
        for route in routes:
            bound = Bound(route, 0)
            if route.proto == "tcp":
                server = await asyncio.start_server(functools.partial(_serve_tcp, bound),
                                                    route.listen_host, route.listen_port)  # fmt: skip
                bound.port = int(server.sockets[0].getsockname()[1])
                bound.server = server
            else:
                transport, front = await loop.create_datagram_endpoint(
                    functools.partial(_Front, bound), local_addr=(route.listen_host, route.listen_port))
                bound.port = int(transport.get_extra_info("sockname")[1])
                bound.server = front
            out.append(bound)
    except BaseException:
        await stop(out)
        raise
    return out


async def stop(bounds: list[Bound]) -> None:
    for bound in bounds:
        if isinstance(bound.server, asyncio.Server):
            bound.server.close()
            live = list(bound.tasks)
            for task in live:
                task.cancel()
            await asyncio.gather(*live, return_exceptions=True)
        elif isinstance(bound.server, _Front):
            bound.server.close()


async def serve(routes: list[Route], *, ready: Any = None) -> list[Bound]:
    """Serve ``routes`` until SIGTERM or SIGINT; ``ready(bounds)`` is called once all are bound."""
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    bounds = await start(routes)
    if ready is not None:
        ready(bounds)
    await done.wait()
    await stop(bounds)
    return bounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netproxy", description=__doc__.splitlines()[0])
    parser.add_argument("routes", nargs="+", help="PROTO:LHOST:LPORT:THOST:TPORT[:UP_MS[:DOWN_MS]]")
    args = parser.parse_args(argv)
    routes = [Route.parse(r) for r in args.routes]

    def ready(bounds: list[Bound]) -> None:
        print(json.dumps({"ports": [b.port for b in bounds]}), flush=True)

    bounds = asyncio.run(serve(routes, ready=ready))
    print(json.dumps({"stats": [b.info() for b in bounds]}), flush=True)
    return 0


class ProxyProcess:
    """``python -m pipeline.harness.faults.netproxy`` as a child process: ``start()`` returns the
    bound ports (route order), ``stop()`` ends it and returns each route's counters."""

    def __init__(self, routes: list[Route], *, start_timeout_s: float = 20.0) -> None:
        self.routes = routes
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.ports: list[int] = []

    def start(self) -> list[int]:
        cmd = [sys.executable, "-m", "pipeline.harness.faults.netproxy", *(r.spec() for r in self.routes)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                     start_new_session=True)  # fmt: skip
        assert self.proc.stdout is not None
        line = _readline(self.proc, self.start_timeout_s)
        if not line:
            self.stop()
            raise RuntimeError(f"netproxy did not start: {' '.join(cmd)}")
        self.ports = list(json.loads(line)["ports"])
        return self.ports

    def stop(self) -> list[dict[str, Any]]:
        proc, self.proc = self.proc, None
        if proc is None:
            return []
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        lines = [ln for ln in (out or "").splitlines() if ln.startswith('{"stats"')]
        return list(json.loads(lines[-1])["stats"]) if lines else []

    def __enter__(self) -> ProxyProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _readline(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The child's first stdout line, or "" if it exits or says nothing within ``timeout_s``."""
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            return ""
    return proc.stdout.readline()


if __name__ == "__main__":
    sys.exit(main())
