"""Helpers for running fetchers against the testbed (tests and ``crawlfleet bench fetch``)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from fetchers.records import Batch, FetchResult, UrlTask
from fetchers.report import BatchReport
from pipeline.settings import Settings
from pipeline.urls import fingerprint

TESTBED_NET = "127.0.10.0/24"


def bed_settings(dns_server: str, **sections: Mapping[str, Any]) -> Settings:
    """Settings for the testbed: its DNS server, its network allowed through the SSRF guard, plus
    ``section={field: value}`` overrides."""
    base: dict[str, dict[str, Any]] = {
        "dns": {"servers": (dns_server,)},
        "security": {"allow_networks": (TESTBED_NET,)},
    }
    for name, values in sections.items():
        base.setdefault(name, {}).update(values)
    return Settings().with_overrides(base)


def bed_resolver(settings: Settings) -> AbstractResolver:
    """Our DNS layer (issue #4) pointed at the testbed's DNS server."""
    from pipeline.dns.aiohttp_resolver import AiohttpResolver
    from pipeline.dns.cache_resolver import CachingResolver

    return AiohttpResolver(CachingResolver.from_settings(settings.dns))


def make_batch(urls: list[str], *, serial: int = 1, fetcher_id: str = "f1") -> Batch:
    return Batch(serial, fetcher_id, [UrlTask(u, fingerprint(u)) for u in urls])


async def run_urls(fetcher: Any, urls: list[str], *, serial: int = 1) -> tuple[dict[str, FetchResult], BatchReport]:
    """Fetch ``urls`` as one batch; results keyed by URL (the last one wins for duplicates)."""
    results: list[FetchResult] = []
    report = await fetcher.fetch_batch(make_batch(urls, serial=serial), results.append)
    return {r.url: r for r in results}, report


class StaticResolver(AbstractResolver):
    """name -> addresses from a dict (tests against local servers); unknown names fail like NXDOMAIN."""

    def __init__(self, table: Mapping[str, list[str]]) -> None:
        self.table = dict(table)

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        if host not in self.table:
            raise OSError(None, f"nxdomain: {host} not found")
        return [
            ResolveResult(hostname=host, host=ip, port=port, family=socket.AF_INET, proto=0, flags=0)
            for ip in self.table[host]
        ]

    async def close(self) -> None:
        return None


@dataclass(slots=True)
class Hit:
    start: float
    end: float
    host: str
    ip: str
    path: str
    user_agent: str


@dataclass
class LocalSite:
    """A small aiohttp server on loopback addresses, run on the caller's loop, that records what a
    fetcher does to it: in-flight requests per Host and per local IP (maxima), every hit with start/end
    times and the User-Agent. Behaviour by path:

    /robots.txt        ``robots[host]`` = (status, body); default 404
    /slow?ms=N         answer after N ms
    /wait?ms=N         same (a read timeout before the response head)
    /ra?status=S&after=V&times=K   the first K hits of this URL answer S with Retry-After V, then 200
    /redirect?to=URL   302 to URL
    /xrobots?v=V       200 with ``X-Robots-Tag: V``
    /badgzip           Content-Encoding: gzip over bytes that are not gzip
    anything else      200 text/html
    """

    ips: tuple[str, ...] = ("127.0.20.1",)
    robots: dict[str, tuple[int, str]] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    max_host: dict[str, int] = field(default_factory=dict)
    max_ip: dict[str, int] = field(default_factory=dict)
    max_total: int = 0
    ports: dict[str, int] = field(default_factory=dict)
    _host_now: Counter[str] = field(default_factory=Counter)
    _ip_now: Counter[str] = field(default_factory=Counter)
    _total_now: int = 0
    _seen: Counter[str] = field(default_factory=Counter)
    _runners: list[web.AppRunner] = field(default_factory=list)

    async def start(self) -> LocalSite:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        for ip in self.ips:
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, ip, 0)
            await site.start()
            server = site._server
            assert server is not None
            self.ports[ip] = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
            self._runners.append(runner)
        return self

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    def url(self, host: str, ip: str, path: str) -> str:
        return f"http://{host}:{self.ports[ip]}{path}"

    def hits_for(self, path_prefix: str) -> list[Hit]:
        return [h for h in self.hits if h.path.startswith(path_prefix)]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        host = request.host.rsplit(":", 1)[0]
        ip = request.transport.get_extra_info("sockname")[0] if request.transport else ""
        hit = Hit(time.monotonic(), 0.0, host, ip, request.path_qs, request.headers.get("User-Agent", ""))
        self.hits.append(hit)  # recorded on arrival, like an access log
        self._host_now[host] += 1
        self._ip_now[ip] += 1
        self._total_now += 1
        self.max_host[host] = max(self.max_host.get(host, 0), self._host_now[host])
        self.max_ip[ip] = max(self.max_ip.get(ip, 0), self._ip_now[ip])
        self.max_total = max(self.max_total, self._total_now)
        try:
            return await self._answer(request, host)
        finally:
            self._host_now[host] -= 1
            self._ip_now[ip] -= 1
            self._total_now -= 1
            hit.end = time.monotonic()

    async def _answer(self, request: web.Request, host: str) -> web.StreamResponse:
        path, q = request.path, request.query
        if path == "/robots.txt":
            status, body = self.robots.get(host, (404, "not found"))
            return web.Response(status=status, text=body)
        if path in ("/slow", "/wait"):
            await asyncio.sleep(int(q.get("ms", "100")) / 1000)
        elif path == "/ra":
            key = f"{host}{request.path_qs}"
            self._seen[key] += 1
            if self._seen[key] <= int(q.get("times", "1")):
                return web.Response(status=int(q.get("status", "429")), headers={"Retry-After": q.get("after", "1")})
        elif path == "/redirect":
            return web.Response(status=302, headers={"Location": q.get("to", "/")})
        elif path == "/badgzip":
            junk = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"not deflate data at all" * 20
            return web.Response(body=junk, headers={"Content-Encoding": "gzip", "Content-Type": "text/html"})
        elif path == "/xrobots":
            return web.Response(text="<html></html>", content_type="text/html", headers={"X-Robots-Tag": q.get("v", "")})
        return web.Response(text=f"<html><body>{host}{path}</body></html>", content_type="text/html")
