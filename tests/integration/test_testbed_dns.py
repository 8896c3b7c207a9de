"""The testbed's DNS server over real UDP/TCP: zone records, NXDOMAIN, and the special names."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import aiodns
import pytest
from dnslib import QTYPE, RCODE, DNSRecord

from pipeline.harness.testbed.dns_server import Zone, start_dns
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.model import Web, ip_for_host
from tests.manual_clock import ManualClockLoop, run_manual

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    extra = ("--dns-slow-ms", "300")
    with TestbedProcess(10, 5, seed=2, workdir=tmp_path_factory.mktemp("tb_dns"), extra_args=extra) as t:
        yield t


def ask(
    tb: TestbedProcess, name: str, qtype: str = "A", *, tcp: bool = False, timeout: float = 2
) -> DNSRecord:
    raw = DNSRecord.question(name, qtype).send("127.0.0.1", tb.dns_port, tcp=tcp, timeout=timeout)
    return DNSRecord.parse(raw)


def test_site_records_and_ttls(tb: TestbedProcess) -> None:
    web = Web(10, 5, seed=2)
    for i in range(10):
        r = ask(tb, f"site{i}.crawl.test")
        assert r.header.rcode == RCODE.NOERROR and r.header.aa == 1
        assert [str(x.rdata) for x in r.rr] == [ip_for_host(i, 10)]
        assert r.rr[0].ttl == web.ttl(i)
    assert len({web.ttl(i) for i in range(10)}) >= 3
    r = ask(tb, "SITE3.Crawl.TEST")  # case-insensitive, question echoed as asked
    assert str(r.rr[0].rdata) == ip_for_host(3, 10) and str(r.q.qname) == "SITE3.Crawl.TEST."


def test_nxdomain_and_nodata(tb: TestbedProcess) -> None:
    for name in ("site10.crawl.test", "nope.crawl.test", "hostile.crawl.test"):
        r = ask(tb, name)
        assert r.header.rcode == RCODE.NXDOMAIN and not r.rr and r.auth[0].rtype == QTYPE.SOA
    r = ask(tb, "site1.crawl.test", "AAAA")
    assert r.header.rcode == RCODE.NOERROR and not r.rr
    assert ask(tb, "crawl.test", "SOA").rr[0].rtype == QTYPE.SOA


def test_special_names(tb: TestbedProcess) -> None:
    r = ask(tb, "v6.crawl.test", "AAAA")
    assert str(r.rr[0].rdata) == "::1"
    assert str(ask(tb, "v6.crawl.test").rr[0].rdata) == "127.0.10.1"
    assert ask(tb, "shortttl.crawl.test").rr[0].ttl == 1
    assert ask(tb, "longttl.crawl.test").rr[0].ttl == 7 * 24 * 3600
    assert str(ask(tb, "private.crawl.test").rr[0].rdata) == "127.0.0.53"
    r = ask(tb, "truncated.crawl.test")
    assert r.header.tc == 1 and not r.rr
    r = ask(tb, "truncated.crawl.test", tcp=True)
    assert r.header.tc == 0 and str(r.rr[0].rdata) == "127.0.10.1"
    assert ask(tb, "servfail.crawl.test").header.rcode == RCODE.SERVFAIL
    assert str(ask(tb, "n48123.bench.crawl.test").rr[0].rdata) == "127.0.10.1"
    assert ask(tb, "x.bench.crawl.test").header.rcode == RCODE.NXDOMAIN
    assert str(ask(tb, "slow.crawl.test").rr[0].rdata) == "127.0.10.1"


def test_garbage_and_silent(tb: TestbedProcess) -> None:
    q = DNSRecord.question("garbage.crawl.test")
    raw = q.send("127.0.0.1", tb.dns_port, timeout=2)
    assert raw[:2] == q.pack()[:2]
    with pytest.raises(Exception):  # noqa: B017 - dnslib raises its own parse errors
        DNSRecord.parse(raw)
    with pytest.raises(socket.timeout):
        ask(tb, "silent.crawl.test", timeout=0.5)


def _addrs(res: Any) -> list[str]:
    return [r.data.addr for r in res.answer]


def test_aiodns_client(tb: TestbedProcess) -> None:
    async def run() -> None:
        resolver = aiodns.DNSResolver(nameservers=["127.0.0.1"], udp_port=tb.dns_port, tcp_port=tb.dns_port)
        res = await resolver.query_dns("site4.crawl.test", "A")
        assert _addrs(res) == [ip_for_host(4, 10)]
        with pytest.raises(aiodns.error.DNSError):
            await resolver.query_dns("nothing.crawl.test", "A")
        # c-ares retries a truncated UDP answer over TCP by itself
        res = await resolver.query_dns("truncated.crawl.test", "A")
        assert _addrs(res) == ["127.0.10.1"]
        names = [f"n{k}.bench.crawl.test" for k in range(500)]
        got = await asyncio.gather(*(resolver.query_dns(n, "A") for n in names))
        assert all(_addrs(g) == ["127.0.10.1"] for g in got)

    asyncio.run(run())


def test_latency_option() -> None:
    """The answer waits the configured latency on the server's clock: on a loop whose clock moves only
    when told (tests/manual_clock.py), nothing comes back over real UDP and TCP until it has moved 0.2 s."""

    async def main(loop: ManualClockLoop) -> None:
        port, parts = await start_dns(Zone(Web(2, 2), latency_ms=200), "127.0.0.1", 0)
        got: asyncio.Queue[bytes] = asyncio.Queue()

        class Client(asyncio.DatagramProtocol):
            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                got.put_nowait(data)

        client, _ = await loop.create_datagram_endpoint(Client, remote_addr=("127.0.0.1", port))
        r, w = await asyncio.open_connection("127.0.0.1", port)
        try:
            query = DNSRecord.question("site1.crawl.test").pack()
            client.sendto(query)
            w.write(len(query).to_bytes(2, "big") + query)
            over_tcp = asyncio.ensure_future(r.readexactly(2))
            await loop.idle()
            assert got.empty() and not over_tcp.done()  # held: the server's clock has not moved
            loop.advance(0.2)
            answer = DNSRecord.parse(await got.get())
            assert str(answer.rr[0].rdata) == ip_for_host(1, 2)
            assert DNSRecord.parse(await r.readexactly(int.from_bytes(await over_tcp, "big"))).rr
        finally:
            client.close()
            w.close()
            for part in parts:
                part.close()  # type: ignore[attr-defined]

    run_manual(main)
