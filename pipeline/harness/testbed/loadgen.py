"""A quick load generator: how many pages a second the testbed serves (is it ever the bottleneck?).

Fetches normal pages of a running testbed with a bare aiohttp client (connecting straight to the
host's address, no DNS), ``concurrency`` requests in flight, for ``seconds`` seconds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from pipeline.harness.testbed.model import Web, host_name, ip_for_host


@dataclass(frozen=True, slots=True)
class LoadResult:
    requests: int
    bytes: int
    errors: int
    elapsed_s: float

    @property
    def req_per_s(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed_s, 3),
            "req_per_s": round(self.req_per_s, 1),
            "mb_per_s": round(self.bytes / self.elapsed_s / 1e6, 1) if self.elapsed_s else 0.0,
        }


async def run_load(
    web: Web, *, seconds: float = 5.0, concurrency: int = 64, distinct: bool = True
) -> LoadResult:
    """Hammer the testbed. ``distinct`` walks pages in order (cache misses, like a crawl)."""
    counter = 0
    n_total = web.hosts * web.pages
    done = errors = nbytes = 0
    stop_at = time.perf_counter() + seconds
    conn = aiohttp.TCPConnector(limit=concurrency, limit_per_host=0)

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal counter, done, errors, nbytes
        while time.perf_counter() < stop_at:
            k = counter if distinct else counter % 64
            counter += 1
            i, m = k % web.hosts, (k // web.hosts) % web.pages
            url = f"http://{ip_for_host(i, web.hosts)}:{web.port}{web.page_path(m)}"
            try:
                async with session.get(url, headers={"Host": host_name(i)}) as resp:
                    body = await resp.read()
                    nbytes += len(body)
                    done += 1
            except aiohttp.ClientError:
                errors += 1
            if counter >= n_total:
                counter = 0

    start = time.perf_counter()
    async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return LoadResult(done, nbytes, errors, time.perf_counter() - start)


async def run_dns_load(
    host: str, port: int, *, names: list[str], window: int = 200, timeout_s: float = 2.0
) -> LoadResult:
    """Ask for every name once (A record) over UDP, ``window`` queries in flight; unanswered
    queries after ``timeout_s`` count as errors."""
    loop = asyncio.get_running_loop()
    pending: dict[int, asyncio.Future[bytes]] = {}

    class Proto(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
            fut = pending.pop(int.from_bytes(data[:2], "big"), None)
            if fut is not None and not fut.done():
                fut.set_result(data)

    transport, _ = await loop.create_datagram_endpoint(Proto, remote_addr=(host, port))
    sem = asyncio.Semaphore(window)
    done = errors = nbytes = 0

    async def one(k: int, name: str) -> None:
        nonlocal done, errors, nbytes
        qid = k & 0xFFFF
        labels = b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\x00"
        query = (
            qid.to_bytes(2, "big")
            + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
            + labels
            + b"\x00\x01\x00\x01"
        )
        async with sem:
            fut = loop.create_future()
            pending[qid] = fut
            transport.sendto(query)
            try:
                nbytes += len(await asyncio.wait_for(fut, timeout_s))
                done += 1
            except TimeoutError:
                pending.pop(qid, None)
                errors += 1

    start = time.perf_counter()
    await asyncio.gather(*(one(k, n) for k, n in enumerate(names)))
    elapsed = time.perf_counter() - start
    transport.close()
    return LoadResult(done, nbytes, errors, elapsed)


def measure(
    hosts: int,
    pages: int,
    *,
    seconds: float = 5.0,
    concurrency: int = 64,
    engine: str = "fast",
    workers: int = 1,
    mutate_rate: float | None = None,
) -> dict[str, Any]:
    """Start a testbed subprocess, load it, and report req/s plus the server's CPU per request
    (the capacity figure that does not depend on how fast this client is). ``mutate_rate``: serve the
    living web (``--mutate``) at that many test seconds per second; None = the static web."""
    import psutil

    from pipeline.harness.testbed.harness import TestbedProcess

    out: dict[str, Any] = {"hosts": hosts, "pages": pages, "engine": engine, "workers": workers}
    if mutate_rate is not None:
        out["mutate_rate"] = mutate_rate
    with TestbedProcess(
        hosts,
        pages,
        engine=engine,
        workers=workers,
        mutate=mutate_rate is not None,
        mutate_rate=mutate_rate or 1.0,
    ) as tb:
        assert tb.proc is not None
        server = psutil.Process(tb.proc.pid)

        def server_cpu() -> float:
            procs = [server, *server.children()]
            return sum(p.cpu_times().user + p.cpu_times().system for p in procs)

        for label, distinct in (("http_distinct", True), ("http_repeated", False)):
            c0 = server_cpu()
            r = asyncio.run(run_load(tb.web, seconds=seconds, concurrency=concurrency, distinct=distinct))
            row = r.as_dict()
            row["server_cpu_us_per_req"] = round((server_cpu() - c0) / max(1, r.requests) * 1e6, 1)
            out[label] = row
        names = [f"n{k}.bench.crawl.test" for k in range(20_000)]
        c0 = server_cpu()
        r = asyncio.run(run_dns_load("127.0.0.1", tb.dns_port, names=names))
        row = r.as_dict()
        row["server_cpu_us_per_req"] = round((server_cpu() - c0) / max(1, r.requests) * 1e6, 1)
        out["dns_distinct"] = row
    return out
