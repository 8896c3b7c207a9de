"""Run the testbed: HTTP on every testbed address, DNS on 127.0.0.1, until SIGTERM/SIGINT.

With ``workers > 1`` the listening sockets are created first and the process forks; every
process accepts on the same sockets (the kernel spreads connections), the parent alone runs DNS
and the readiness check. The ready file (JSON, written atomically) appears only once an HTTP
request and a DNS query have both been answered.

With ``tls`` every address also listens on ``tls_port`` with the testbed's own CA (tlscerts.py; made
before the fork, so every worker serves the same certificates) and serves the https web there;
``plain_http`` says what the plain port does then (fastserver.py: "serve", "redirect", "disallow").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import signal
import socket
import ssl
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from pipeline.harness.testbed.accesslog import AccessLog
from pipeline.harness.testbed.dns_server import Zone, start_dns
from pipeline.harness.testbed.fastserver import FastHTTP
from pipeline.harness.testbed.hostile import HostileSite, start_hostile
from pipeline.harness.testbed.living import CLASSIC, Living
from pipeline.harness.testbed.model import EXPIRED_HOST, WRONGNAME_HOST, Web, all_ips, host_name, ip_for_host
from pipeline.harness.testbed.server import READY_HOST, TestbedHTTP, bind_sockets

if TYPE_CHECKING:
    from pipeline.harness.testbed.tlscerts import TlsPki


@dataclass(frozen=True, slots=True)
class ServeOptions:
    hosts: int
    pages: int
    seed: int = 0
    port: int = 8080
    dns_port: int = 5353
    dns_host: str = "127.0.0.1"
    access_log: str | None = None
    ready_file: str | None = None
    workers: int = 1
    hostile: bool = False
    dns_latency_ms: float = 0.0
    dns_slow_ms: float = 2000.0
    cache_size: int = 4096
    ipv6: bool = True
    hostile_port: int = 0
    gzip_pages: bool = False
    zstd_pages: bool = False
    engine: str = "fast"  # "fast" (fastserver.py) or "aiohttp" (server.py)
    mutate: bool = False  # the living web (living.py): pages change, validators, 304, sitemaps
    mutate_epoch: float | None = None  # wall seconds at test time 0; None = when serving starts
    mutate_rate: float = 1.0  # test seconds per wall second
    mutate_mix: str = CLASSIC  # the pages' change classes (living.MIXES)
    hostile_sitemaps: bool = True  # with mutate: serve sitemapgen's hostile files
    robots_change_s: float = math.inf  # with mutate: Living.robots_change_s
    throttle_every: int = 0  # with mutate: Living.throttle_every
    lying_validators: bool = False  # with mutate: Living.lying_validators
    tls: bool = False  # also serve the https web on tls_port (fast engine only)
    tls_port: int = 0
    tls_dir: str | None = None  # where the CA and certificates are written (None: a temporary directory)
    plain_http: str = "serve"  # with tls: "serve", "redirect" (301 to https) or "disallow" (robots.txt)
    products: bool = False  # product markup on some normal pages (products.py)


def living_of(opts: ServeOptions) -> Living | None:
    if not opts.mutate:
        return None
    epoch = time.time() if opts.mutate_epoch is None else opts.mutate_epoch
    return Living(epoch, opts.mutate_rate, hostile_sitemaps=opts.hostile_sitemaps, mix=opts.mutate_mix,
                  robots_change_s=opts.robots_change_s, throttle_every=opts.throttle_every,
                  lying_validators=opts.lying_validators)  # fmt: skip


def _listen_ips(opts: ServeOptions) -> list[str]:
    ips = all_ips(opts.hosts)
    if opts.ipv6 and socket.has_ipv6:
        try:
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
                s.bind(("::1", 0))
            ips.append("::1")
        except OSError:
            pass
    return ips


@dataclass(slots=True)
class Listeners:
    """The listening sockets of one testbed and, with TLS, its certificates."""

    plain: list[socket.socket]
    tls: list[socket.socket]
    pki: TlsPki | None = None


def serve(opts: ServeOptions) -> int:
    """Blocking entry point of ``crawlfleet testbed serve``."""
    if opts.tls and opts.engine != "fast":
        raise ValueError("--tls needs --engine fast")
    ips = _listen_ips(opts)
    socks = bind_sockets(ips, opts.port, reuse_port=opts.workers > 1)
    port = socks[0].getsockname()[1]
    web = Web(opts.hosts, opts.pages, seed=opts.seed, port=port, living=living_of(opts), products=opts.products)
    listen = Listeners(socks, [])
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if opts.tls:
        from pipeline.harness.testbed.tlscerts import make_pki  # cryptography: imported only for TLS

        listen.tls = bind_sockets(ips, opts.tls_port, reuse_port=opts.workers > 1)
        if opts.tls_dir is None:
            tmp = tempfile.TemporaryDirectory(prefix="testbed-tls-")
        listen.pki = make_pki(Path(opts.tls_dir or tmp.name), opts.hosts)  # type: ignore[union-attr]
    children: list[int] = []
    for _ in range(max(0, opts.workers - 1)):
        pid = os.fork()
        if pid == 0:  # worker: HTTP only
            code = 0
            try:
                asyncio.run(_run_worker(opts, web, listen))
            except BaseException:  # noqa: BLE001 - a worker must never return into the parent's code
                code = 1
            os._exit(code)
        children.append(pid)
    try:
        return asyncio.run(_run_main(opts, web, listen, children))
    finally:
        if tmp is not None:
            tmp.cleanup()
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _start_http(
    opts: ServeOptions, web: Web, log: AccessLog, listen: Listeners
) -> list[asyncio.AbstractServer]:
    """Serve the web on the plain sockets and, with TLS, the https web on the TLS sockets."""
    if opts.engine != "fast":
        return await TestbedHTTP(web, log, cache_size=opts.cache_size).start(listen.plain)
    tls_port = listen.tls[0].getsockname()[1] if listen.tls else 0
    plain_mode = "" if not listen.tls or opts.plain_http == "serve" else opts.plain_http
    plain = FastHTTP(web, log, cache_size=opts.cache_size, gzip_pages=opts.gzip_pages, zstd_pages=opts.zstd_pages,
                     plain_mode=plain_mode, tls_port=tls_port)  # fmt: skip
    servers = await plain.start(listen.plain)
    if listen.pki is not None:
        asyncio.get_running_loop().set_exception_handler(_quiet_tls_failures)
        https = dataclasses.replace(web, scheme="https", port=tls_port)
        secure = FastHTTP(https, log, cache_size=opts.cache_size, gzip_pages=opts.gzip_pages,
                          zstd_pages=opts.zstd_pages, scheme="https")  # fmt: skip
        servers += await secure.start(listen.tls, ssl=listen.pki.listening_context(opts.hosts))
    return servers


def _quiet_tls_failures(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Clients that refuse a certificate (the expired and wrong-name hosts) end handshakes on purpose:
    not worth a traceback on stderr per connection."""
    if isinstance(context.get("exception"), ssl.SSLError | ConnectionError):
        return
    loop.default_exception_handler(context)


async def _run_worker(opts: ServeOptions, web: Web, listen: Listeners) -> None:
    stop = _stop_event()
    log = AccessLog(opts.access_log)
    servers = await _start_http(opts, web, log, listen)
    try:
        await stop.wait()
    finally:
        for s in servers:
            s.close()
        log.close()


async def _run_main(opts: ServeOptions, web: Web, listen: Listeners, children: list[int]) -> int:
    stop = _stop_event()
    log = AccessLog(opts.access_log)
    socks = listen.plain
    servers = await _start_http(opts, web, log, listen)
    zone = Zone(web, hostile=opts.hostile, latency_ms=opts.dns_latency_ms, slow_ms=opts.dns_slow_ms)
    dns_port, dns_parts = await start_dns(zone, opts.dns_host, opts.dns_port)
    hostile: HostileSite | None = None
    if opts.hostile:
        hostile = HostileSite(port=0, web_port=web.port, log=log)
        servers.append(await start_hostile(hostile, opts.hostile_port))
    try:
        ips = [s.getsockname()[0] for s in socks]
        await _self_check(ips[0], web.port, opts.dns_host, dns_port)
        info: dict[str, Any] = {
            "pid": os.getpid(),
            "port": web.port,
            "dns_host": opts.dns_host,
            "dns_port": dns_port,
            "ips": ips,
            "hosts": opts.hosts,
            "pages": opts.pages,
            "seed": opts.seed,
            "hostile": opts.hostile,
            "seeds": web.seeds(),
            "host_ips": {host_name(i): ip for i, ip in enumerate(_host_ips(web))},
            "access_log": opts.access_log,
            "workers": opts.workers,
            "http_pids": [os.getpid(), *children],  # every process that serves (and logs) HTTP
        }
        if web.living is not None:
            info["mutate"] = {
                "epoch": web.living.epoch,
                "rate": web.living.rate,
                "hostile_sitemaps": web.living.hostile_sitemaps,
                "mix": web.living.mix,
                "robots_change_s": None if math.isinf(web.living.robots_change_s) else web.living.robots_change_s,
                "throttle_every": web.living.throttle_every,
                "lying_validators": web.living.lying_validators,
            }
        if listen.pki is not None:
            tls_port = listen.tls[0].getsockname()[1]
            https = dataclasses.replace(web, scheme="https", port=tls_port)
            info["tls"] = {"port": tls_port, "ca": str(listen.pki.ca), "seeds": https.seeds(),
                           "plain_http": opts.plain_http, "bad_cert_hosts": [EXPIRED_HOST, WRONGNAME_HOST]}  # fmt: skip
        if hostile is not None:
            info["hostile_port"] = hostile.port
            info["hostile_seed"] = hostile.url("/")
        if opts.ready_file:
            tmp = f"{opts.ready_file}.tmp"
            with open(tmp, "w") as fh:
                json.dump(info, fh, indent=1)
            os.replace(tmp, opts.ready_file)
        print(
            json.dumps({"ready": True, "port": web.port, "dns_port": dns_port}), file=sys.stderr, flush=True
        )
        await stop.wait()
    finally:
        for s in servers:
            s.close()
        for part in dns_parts:
            part.close()  # type: ignore[attr-defined]
        log.close()
    return 0


def _host_ips(web: Web) -> list[str]:
    return [ip_for_host(i, web.hosts) for i in range(web.hosts)]


async def _self_check(ip: str, port: int, dns_host: str, dns_port: int) -> None:
    """One HTTP request and one DNS query must be answered before we declare readiness."""
    host = f"[{ip}]" if ":" in ip else ip
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{host}:{port}/", headers={"Host": READY_HOST}) as resp,
    ):
        await resp.read()
    loop = asyncio.get_running_loop()
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05site0\x05crawl\x04test\x00\x00\x01\x00\x01"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        await loop.sock_connect(s, (dns_host, dns_port))
        await loop.sock_sendall(s, query)
        data = await asyncio.wait_for(loop.sock_recv(s, 512), 5.0)
    if data[:2] != b"\x12\x34":
        raise RuntimeError("DNS self-check failed")
