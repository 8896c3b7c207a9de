"""``crawlfleet bench local``: the embedded crawl vs a bare aiohttp + selectolax loop, same run.

Both run against one testbed process (its own core) over the same URLs. The bare loop is the
ceiling: a fixed URL list, a static name->IP map, 256 sockets and 8 per host, link extraction with
selectolax, and nothing else (no frontier, no politeness, no store). The crawl uses the product's
default code path with bench politeness (8 connections per host, no minimum gap, Crawl-delay and the
back-off between 5xx retries capped to 0 because the bare loop has no waits either) and everything
else at defaults: robots.txt,
DNS through our resolver, SSRF guard, dedup, SQLite store with pages, the journal, and (on a machine
with a spare core) a parse process for link extraction and journal lines. Both loops' CPU time counts
every process of theirs except the testbed.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import socket
import ssl as ssl_
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from selectolax.lexbor import LexborHTMLParser

from pipeline.embedded.fetchproc import processes_for
from pipeline.harness.bench.common import testbed_crawl_settings
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.model import host_index, ip_for_host


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=100, help="testbed hosts")
    p.add_argument("--pages", type=int, default=100, help="pages per testbed host")
    p.add_argument("--seed", type=int, default=7, help="seed of the testbed's (or the simulation's) random web")
    p.add_argument("--out", default="", help="keep the crawl directories and logs here (default: a temporary directory, deleted)")
    p.add_argument("--processes", type=int, default=None,
                   help="fetch processes for the crawl (default: fetch.processes, 0)")  # fmt: skip
    p.add_argument("--parse-processes", type=int, default=None,
                   help="parse processes for the crawl (default: fetch.parse_processes, one per spare core)")  # fmt: skip


class _StaticResolver(AbstractResolver):
    def __init__(self, hosts: int) -> None:
        self.hosts = hosts

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        ip = ip_for_host(host_index(host, self.hosts), self.hosts)
        return [ResolveResult(hostname=host, host=ip, port=port, family=socket.AF_INET, proto=0, flags=0)]

    async def close(self) -> None:
        return None


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the crawl's fetch processes are reaped when
    the crawl ends; the testbed, still running, is not counted)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


async def bare_loop(
    urls: list[str], hosts: int, *, per_host: int = 8, ssl: ssl_.SSLContext | bool = True
) -> dict[str, float]:
    """The ceiling: fetch every URL and extract its links, nothing more (``ssl``: aiohttp's, for https)."""
    conn = aiohttp.TCPConnector(limit=256, limit_per_host=per_host, resolver=_StaticResolver(hosts), ssl=ssl)
    links = 0
    queue: asyncio.Queue[str] = asyncio.Queue()
    for u in urls:
        queue.put_nowait(u)

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal links
        while True:
            try:
                url = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                async with session.get(url, allow_redirects=True) as resp:
                    body = await resp.read()
                if resp.content_type == "text/html":
                    links += len(LexborHTMLParser(body).css("a[href]"))
            except aiohttp.ClientError:
                pass

    t0, c0 = time.perf_counter(), _cpu()
    async with aiohttp.ClientSession(connector=conn) as session:
        await asyncio.gather(*(worker(session) for _ in range(256)))
    elapsed, cpu = time.perf_counter() - t0, _cpu() - c0
    return {"pages": len(urls), "elapsed_s": elapsed, "pages_per_s": len(urls) / elapsed, "cpu_s": cpu,
            "links": links}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pipeline.embedded.cli import run_crawl

    workdir = Path(args.out or tempfile.mkdtemp(prefix="bench-local-"))
    with TestbedProcess(args.hosts, args.pages, seed=args.seed, workdir=workdir / "testbed") as tb:
        truth = tb.truth()
        urls = [u for u in truth["pages"] if "/slow" not in u and "/big" not in u]
        bare = asyncio.run(bare_loop(urls, args.hosts))
        settings = testbed_crawl_settings(tb)
        if args.processes is not None:
            settings = settings.with_overrides({"fetch": {"processes": args.processes}})
        if args.parse_processes is not None:
            settings = settings.with_overrides({"fetch": {"parse_processes": args.parse_processes}})
        out = workdir / "crawl"
        shutil.rmtree(out, ignore_errors=True)
        c0 = _cpu()
        summary = run_crawl(settings, list(tb.seeds), out, resume=False, progress=True)
        crawl_cpu = _cpu() - c0
    crawl_pps = summary["pages_fetched"] / summary["elapsed_s"]
    return {
        "testbed": {"hosts": args.hosts, "pages_per_host": args.pages, "truth_pages": len(truth["pages"])},
        "bare_pages_per_s": round(bare["pages_per_s"], 1),
        "bare_cpu_s_per_1k": round(1000 * bare["cpu_s"] / bare["pages"], 3),
        "crawl_pages_fetched": summary["pages_fetched"],
        "crawl_pages_per_s": round(crawl_pps, 1),
        "crawl_cpu_s_per_1k": round(1000 * crawl_cpu / max(1, summary["pages_fetched"]), 3),
        "ratio_crawl_to_bare": round(crawl_pps / bare["pages_per_s"], 3),
        "fetch_processes": processes_for(settings),
        "parse_processes": summary.get("parse_processes", {"processes": 0}),
        "goal": "ratio >= 0.5",
    }
