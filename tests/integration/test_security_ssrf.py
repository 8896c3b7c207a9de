"""SSRF: the guard holds for the initial URL, for redirects and for DNS rebinding, checked on the wire.

A *canary* listens on the forbidden address 127.0.0.53 (loopback, outside the allowed 127.0.10.0/24)
and on ::1, at the ports the hostile inputs point to; the property is that nothing ever connects to
it, whatever the fetcher reports. Only loopback traffic is generated.

DNS rebinding: a tiny authoritative server answers ``rebind.crawl.test`` with an allowed address and,
on the next query, with the forbidden one (TTL 0). With the production resolver stack the S2 cache
pins the first answer for at least a minute; with an uncached resolver the fetcher's own check sees
the allowed answer and the connector's resolver the forbidden one: the guard inside the connector must
refuse it (the address checked is the address connected to). Both fetchers are exercised.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from dnslib import QTYPE, RR, A, DNSRecord

from fetchers.aio import AioFetcher
from fetchers.testing import bed_resolver, bed_settings, run_urls
from fetchers.threaded import ThreadedFetcher
from pipeline.dns.resolver import AresResolver
from pipeline.harness.testbed.harness import TestbedProcess

pytestmark = pytest.mark.integration

FORBIDDEN = "127.0.0.53"


class Canary:
    """TCP listeners that count every connection accepted (the SSRF tripwire)."""

    def __init__(self, addresses: list[tuple[str, int]]) -> None:
        self.hits: list[tuple[str, int]] = []
        self.socks = []
        for host, port in addresses:
            fam = socket.AF_INET6 if ":" in host else socket.AF_INET
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
            s.listen(64)
            s.settimeout(0.2)
            self.socks.append(s)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in self.socks]
        for t in self._threads:
            t.start()

    def _accept(self, s: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = s.accept()
            except (TimeoutError, OSError):
                continue
            self.hits.append(peer[:2])
            conn.close()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        for s in self.socks:
            s.close()


class RebindingDns:
    """UDP DNS for rebind.crawl.test: answers alternate between ``first`` and ``then`` (TTL 0)."""

    def __init__(self, first: str, then: str) -> None:
        self.answers = [first, then]
        self.queries = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            try:
                req = DNSRecord.parse(data)
            except Exception:
                continue
            reply = req.reply()
            if req.q.qtype == QTYPE.A and str(req.q.qname).rstrip(".") == "rebind.crawl.test":
                ip = self.answers[self.queries % 2]
                self.queries += 1
                reply.add_answer(RR(req.q.qname, QTYPE.A, rdata=A(ip), ttl=0))
            self.sock.sendto(reply.pack(), peer)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


class UncachedResolver(AbstractResolver):
    """Every call is a real DNS query (c-ares, no cache): the rebinding attacker's best case."""

    def __init__(self, server: str) -> None:
        self.ares = AresResolver([server], timeout_s=1.0, tries=1)

    async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[ResolveResult]:
        answer = await self.ares.query(host)
        return [ResolveResult(hostname=host, host=a, port=port, family=socket.AF_INET, proto=0, flags=0)
                for a in answer.addresses]  # fmt: skip

    async def close(self) -> None:
        await self.ares.aclose()


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    with TestbedProcess(2, 2, hostile=True, workdir=tmp_path_factory.mktemp("tb-ssrf")) as tb:
        yield tb


@pytest.fixture
def canary(bed: TestbedProcess) -> Iterator[Canary]:
    c = Canary([(FORBIDDEN, bed.port)])
    yield c
    c.close()


def fetch(kind: Any, settings: Any, urls: list[str], resolver: AbstractResolver) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with kind(settings, fetcher_id="s", resolver=resolver) as f:
            got, _ = await run_urls(f, urls)
            return got

    return asyncio.run(go())


FETCHERS = pytest.mark.parametrize("kind", [AioFetcher, ThreadedFetcher], ids=["aio", "threaded"])


@FETCHERS
def test_initial_urls_to_forbidden_addresses(bed: TestbedProcess, canary: Canary, kind: Any) -> None:
    p = bed.port
    urls = [
        f"http://{FORBIDDEN}:{p}/", f"http://private.crawl.test:{p}/", f"http://[::ffff:{FORBIDDEN}]:{p}/",
        f"http://127.0.0.53.:{p}/", f"http://2130706485:{p}/", f"http://0x7f.0.0.53:{p}/", f"http://0177.0.0.53:{p}/",
        f"http://127.53:{p}/", f"http://[::1]:{p}/", f"http://localhost:{p}/", f"http://0.0.0.0:{p}/",
    ]  # fmt: skip
    settings = bed_settings(bed.dns_server, fetch={"total_timeout_s": 3.0, "retries": 0},
                            politeness={"min_host_delay_s": 0.0, "obey_robots": False})  # fmt: skip
    got = fetch(kind, settings, urls, bed_resolver(settings))
    assert canary.hits == []
    for url in urls:
        r = got[url]
        assert r.status == 0 and r.error_class in ("ssrf_blocked", "invalid_url", "dns_nxdomain", "dns_malformed"), (url, r.error_class, r.error_message)
    assert got[f"http://{FORBIDDEN}:{p}/"].error_class == "ssrf_blocked"
    assert got[f"http://private.crawl.test:{p}/"].error_class == "ssrf_blocked"
    assert got[f"http://[::ffff:{FORBIDDEN}]:{p}/"].error_class == "ssrf_blocked"


@FETCHERS
def test_redirects_to_forbidden_addresses(bed: TestbedProcess, canary: Canary, kind: Any) -> None:
    settings = bed_settings(bed.dns_server, fetch={"total_timeout_s": 3.0, "retries": 0},
                            politeness={"min_host_delay_s": 0.0})  # fmt: skip
    urls = [bed.hostile_url("/ssrf-redirect"), bed.hostile_url("/ip-redirect")]
    got = fetch(kind, settings, urls, bed_resolver(settings))
    assert canary.hits == []
    for url in urls:
        assert got[url].error_class == "ssrf_blocked", (url, got[url].error_message)


@FETCHERS
@pytest.mark.parametrize("cached", [True, False], ids=["production-cache", "uncached"])
def test_dns_rebinding_between_check_and_connect(bed: TestbedProcess, canary: Canary, kind: Any, cached: bool) -> None:
    dns = RebindingDns(first="127.0.10.1", then=FORBIDDEN)
    try:
        server = f"127.0.0.1:{dns.port}"
        settings = bed_settings(server, fetch={"total_timeout_s": 3.0, "retries": 0},
                                dns={"min_ttl_s": 0, "refresh_period_s": 0, "negative_ttl_s": 0},
                                politeness={"min_host_delay_s": 0.0, "obey_robots": False})  # fmt: skip
        resolver = bed_resolver(settings) if cached else UncachedResolver(server)
        urls = [f"http://rebind.crawl.test:{bed.port}/a", f"http://rebind.crawl.test:{bed.port}/b"]
        got = fetch(kind, settings, urls, resolver)
    finally:
        dns.close()
    assert canary.hits == [], "connected to the rebound (forbidden) address"
    for url in urls:
        r = got[url]
        # Either the connection went to the checked, allowed address (the testbed answers: no such host,
        # 404) or the guard refused the rebound answer. Never anything else.
        assert (r.status == 404 and r.ip == "127.0.10.1") or r.error_class == "ssrf_blocked", (url, r.status, r.ip, r.error_class, r.error_message)
    if cached:
        assert dns.queries == 1  # pinned by the cache: one answer for both fetches
    elif kind is AioFetcher:
        assert dns.queries >= 2 and any(got[u].error_class == "ssrf_blocked" for u in urls)
