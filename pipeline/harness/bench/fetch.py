"""``crawlfleet bench fetch``: S1's claim (event-driven beats thread-per-download) measured on the testbed.

Four clients fetch the same URLs (every normal page of a ``--hosts`` x ``--pages`` testbed) in the same
run, each in its own fresh process so that CPU time (user+sys from getrusage, all threads) and peak RSS
belong to that client alone; the testbed serves from its own process(es):

- ``bare``: a bare aiohttp loop (one session, ``--concurrency`` in flight, ``--per-host`` per host via
  the connector, our DNS layer, body read whole, URLs interleaved across hosts). No robots, no pacing, no
  records: the ceiling.
- ``aio``: ``AioFetcher`` with every rule on (robots fetched and checked, SSRF guard, capped decoding,
  pacer, FetchResult per URL), fed like the dispatcher feeds it: batches of up to 64 URLs of one host, a
  host in one batch at a time, a new batch whenever ``free_slots`` has room.
- ``h1``: ``H1Fetcher``, the crawl's default (the same engine over the lean HTTP/1.1 transport,
  ``fetchers.h1``), fed the same way.
- ``threaded``: ``ThreadedFetcher`` (requests-futures, ``--concurrency`` threads), fed the same way.

Politeness for the bench: per-host concurrency ``--per-host`` (8), no minimum delay and Crawl-delay capped
at 0 (so the testbed's Crawl-delay host does not dominate), no per-IP limit (the testbed puts several hosts
on each loopback address and the bare loop has no such limit). Robots are fetched and obeyed. Figures: pages/s, CPU s per 1,000 pages, pages per CPU second, peak
RSS, and ratios to the bare loop and to the threaded fetcher measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import platform
import resource
import time
from typing import Any

KINDS = ("bare", "aio", "h1", "threaded")
CHUNK = 64  # URLs of one host per batch in the bench (the dispatcher's base batch size k)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", type=int, default=100, help="testbed hosts")
    parser.add_argument("--pages", type=int, default=100, help="pages per host")
    parser.add_argument("--concurrency", type=int, default=256, help="sockets in flight")
    parser.add_argument("--per-host", type=int, default=8, help="concurrent connections per host")
    parser.add_argument("--clients", default=",".join(KINDS), help="comma list of bare,aio,h1,threaded")
    parser.add_argument("--testbed-workers", type=int, default=1, help="testbed server processes")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every client; the best round is kept")


def _urls(hosts: int, pages: int, port: int) -> list[str]:
    from pipeline.harness.testbed.model import Web

    web = Web(hosts, pages, port=port)
    return [web.url(i, web.page_path(m)) for i in range(hosts) for m in range(pages)]


def _settings(dns_server: str, concurrency: int, per_host: int) -> Any:
    from fetchers.testing import bed_settings

    return bed_settings(
        dns_server,
        fetch={"concurrency": concurrency, "retries": 0},
        politeness={
            "per_host_concurrency": per_host,
            "per_ip_concurrency": concurrency,  # the bare loop has no per-IP limit either
            "min_host_delay_s": 0.0,
            "max_crawl_delay_s": 0.0,
        },
    )


async def _bare(urls: list[str], settings: Any) -> tuple[int, int]:
    import aiohttp

    from fetchers.testing import bed_resolver

    f = settings.fetch
    connector = aiohttp.TCPConnector(
        limit=f.concurrency, limit_per_host=settings.politeness.per_host_concurrency,
        resolver=bed_resolver(settings), use_dns_cache=False,
    )  # fmt: skip
    sem = asyncio.Semaphore(f.concurrency)
    ok = nbytes = 0
    async with aiohttp.ClientSession(connector=connector, headers={"User-Agent": f.user_agent}) as session:

        async def one(url: str) -> None:
            nonlocal ok, nbytes
            async with sem:
                try:
                    async with session.get(url) as resp:
                        body = await resp.read()
                        ok += resp.status == 200
                        nbytes += len(body)
                except (aiohttp.ClientError, TimeoutError):
                    pass

        await asyncio.gather(*(one(u) for u in _round_robin(urls)))
    return ok, nbytes


def _round_robin(urls: list[str]) -> list[str]:
    """Interleave hosts so the bare loop's 256 slots spread over hosts (its per-host limit is the connector's)."""
    from pipeline.urls import host_of

    by_host: dict[str, list[str]] = {}
    for u in urls:
        by_host.setdefault(host_of(u), []).append(u)
    lists = list(by_host.values())
    return [lst[i] for i in range(max(map(len, lists), default=0)) for lst in lists if i < len(lst)]


async def _fetcher(kind: str, urls: list[str], settings: Any, *, batches: Any = None) -> tuple[int, int]:
    """Feed the fetcher the way the dispatcher does: batches of one host's URLs (at most CHUNK), a host in
    at most one batch at a time (its lease), a new batch only while ``free_slots`` has room for it."""
    from fetchers.aio import AioFetcher
    from fetchers.h1 import H1Fetcher
    from fetchers.records import Batch, FetchResult, UrlTask
    from fetchers.testing import bed_resolver
    from fetchers.threaded import ThreadedFetcher

    cls = {"aio": AioFetcher, "h1": H1Fetcher}.get(kind, ThreadedFetcher)
    chunks = batches if batches is not None else _chunks(urls)
    ready = list(chunks)  # hosts not leased right now, in order
    ready.reverse()
    ok = nbytes = 0
    room = asyncio.Event()

    def on_result(r: FetchResult) -> None:
        nonlocal ok, nbytes
        ok += r.status == 200 and not r.error_class
        nbytes += len(r.body)
        room.set()

    async with cls(settings, fetcher_id=kind, resolver=bed_resolver(settings)) as fetcher:
        inflight = 0
        serial = 0
        tasks = []

        async def lease(host: str, tasks: list[UrlTask], serial: int) -> None:
            nonlocal inflight
            await fetcher.fetch_batch(Batch(serial, kind, tasks), on_result)
            if chunks[host]:
                ready.append(host)  # lease ends; the host's next chunk may go out
            inflight -= 1
            room.set()

        while ready or inflight:
            while ready and fetcher.free_slots >= len(chunks[ready[-1]][0]):
                host = ready.pop()
                serial += 1
                inflight += 1
                tasks.append(asyncio.create_task(lease(host, chunks[host].pop(0), serial)))
            room.clear()
            if ready or inflight:
                await room.wait()
        await asyncio.gather(*tasks)
    return ok, nbytes


def _chunks(urls: list[str]) -> dict[str, list[list[Any]]]:
    """host -> batches of at most CHUNK UrlTasks (what the dispatcher would hand out; built before timing)."""
    from fetchers.records import UrlTask
    from pipeline.urls import fingerprint, host_of

    chunks: dict[str, list[list[Any]]] = {}
    for u in urls:
        host_chunks = chunks.setdefault(host_of(u), [[]])
        if len(host_chunks[-1]) >= CHUNK:
            host_chunks.append([])
        host_chunks[-1].append(UrlTask(u, fingerprint(u)))
    return chunks


def _child(kind: str, urls: list[str], dns_server: str, concurrency: int, per_host: int, out: Any) -> None:
    # One-time costs stay outside the measurement: imports and the DNS layer's TLD table.
    import fetchers.aio  # noqa: F401
    import fetchers.threaded  # noqa: F401
    from pipeline.dns.tld import tld_table

    tld_table()
    settings = _settings(dns_server, concurrency, per_host)
    batches = None if kind == "bare" else _chunks(urls)  # the dispatcher's work, not the fetcher's
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    coro = _bare(urls, settings) if kind == "bare" else _fetcher(kind, urls, settings, batches=batches)
    ok, nbytes = asyncio.run(coro)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    out.put({"kind": kind, "ok": ok, "bytes": nbytes, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": r1.ru_maxrss / 1024})


def _measure(kind: str, urls: list[str], dns_server: str, args: argparse.Namespace) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(kind, urls, dns_server, args.concurrency, args.per_host, q))
    p.start()
    res: dict[str, Any] = q.get(timeout=900)
    p.join(30)
    n = len(urls)
    res["urls"] = n
    res["pages_per_s"] = round(res["ok"] / res["wall_s"], 1)
    res["cpu_s_per_1k_pages"] = round(1000 * res["cpu_s"] / max(1, res["ok"]), 3)
    res["pages_per_cpu_s"] = round(res["ok"] / max(1e-9, res["cpu_s"]), 1)
    res["wall_s"], res["cpu_s"], res["peak_rss_mb"] = round(res["wall_s"], 3), round(res["cpu_s"], 3), round(res["peak_rss_mb"], 1)
    return res


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pipeline.harness.testbed.harness import TestbedProcess

    kinds = [k.strip() for k in args.clients.split(",") if k.strip()]
    out: dict[str, Any] = {
        "machine": {"nproc": os.cpu_count(), "cpu": _cpu_model(), "python": platform.python_version()},
        "params": {k: getattr(args, k) for k in ("hosts", "pages", "concurrency", "per_host", "testbed_workers", "rounds")},
    }
    with TestbedProcess(args.hosts, args.pages, workers=args.testbed_workers) as tb:
        urls = _urls(args.hosts, args.pages, tb.port)
        best: dict[str, dict[str, Any]] = {}
        for _ in range(args.rounds):
            for kind in kinds:
                res = _measure(kind, urls, tb.dns_server, args)
                if kind not in best or res["pages_per_s"] > best[kind]["pages_per_s"]:
                    best[kind] = res
    out.update(best)
    ratios: dict[str, float] = {}
    for kind, base in (("aio", "bare"), ("h1", "bare"), ("threaded", "bare"), ("aio", "threaded"), ("h1", "aio")):
        if base in best and kind in best:
            b, k = best[base], best[kind]
            ratios[f"{kind}_vs_{base}_pages_per_s"] = round(k["pages_per_s"] / b["pages_per_s"], 3)
            ratios[f"{kind}_vs_{base}_pages_per_cpu_s"] = round(k["pages_per_cpu_s"] / b["pages_per_cpu_s"], 3)
    out["ratios"] = ratios
    if "aio" in best:
        out["goals"] = {
            "aio_ge_3x_threaded_pages_per_cpu_s": ratios.get("aio_vs_threaded_pages_per_cpu_s", 0) >= 3.0,
            "aio_ge_70pct_bare_pages_per_s": ratios.get("aio_vs_bare_pages_per_s", 0) >= 0.7,
        }
    if "h1" in best:
        out.setdefault("goals", {})["h1_ge_70pct_bare_pages_per_s"] = ratios.get("h1_vs_bare_pages_per_s", 0) >= 0.7
    return out
