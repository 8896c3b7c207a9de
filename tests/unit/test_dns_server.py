"""The bottom server's answer logic (DqServer.answer) over a fake upper layer at the Upstream seam."""

from __future__ import annotations

import asyncio
import socket

from dnslib import RCODE, DNSRecord

from pipeline.dns.cache_resolver import CachingResolver
from pipeline.dns.errors import Answer, DnsError
from pipeline.dns.negative import NegativeCache
from pipeline.dns.policy import TtlPolicy
from pipeline.dns.server import DqServer
from tests.fixtures.dns import FakeClock


class FakeUpstream:
    """Answers by name: a list of addresses with a TTL, or a DnsError kind."""

    def __init__(self, table: dict[str, tuple[list[str], int] | str]) -> None:
        self.table = table
        self.queries_sent = 0

    async def query(self, host: str, family: int = socket.AF_INET) -> Answer:
        self.queries_sent += 1
        value = self.table.get(host, "nxdomain")
        if isinstance(value, str):
            raise DnsError(value, host=host)
        return Answer(tuple(value[0]), value[1])

    async def aclose(self) -> None:
        return None


def server(table: dict[str, tuple[list[str], int] | str], clock: FakeClock) -> tuple[DqServer, FakeUpstream]:
    upstream = FakeUpstream(table)
    negative = NegativeCache(capacity=1000, fp_rate=1e-4, ttl_s=300, clock=clock)
    cache = CachingResolver(upstream, policy=TtlPolicy(300, 3600, refresh_period_s=0), cache_size=100,
                            negative=negative, clock=clock, transient_ttl_s=0.0)  # fmt: skip
    return DqServer(cache), upstream


def ask(srv: DqServer, name: str, qtype: str = "A", *, tcp: bool = False) -> DNSRecord:
    out = asyncio.run(srv.answer(bytes(DNSRecord.question(name, qtype).pack()), tcp=tcp))
    assert out is not None
    return DNSRecord.parse(out)


def test_a_hit_is_served_from_the_cache_with_the_remaining_clamped_ttl() -> None:
    clock = FakeClock()
    srv, up = server({"a.test": (["127.0.0.9"], 5), "long.test": (["127.0.0.8"], 10**9)}, clock)
    first = ask(srv, "a.test")
    assert [str(rr.rdata) for rr in first.rr] == ["127.0.0.9"] and first.rr[0].ttl == 300  # 5 s raised to 300
    clock.advance(100)
    second = ask(srv, "a.test")
    assert second.rr[0].ttl == 200 and up.queries_sent == 1  # from the cache, counting down
    assert ask(srv, "long.test").rr[0].ttl == 3600  # cut to the maximum
    stats = srv.stats()
    assert stats["cache_hits"] == 1 and stats["upstream_queries"] == 2 and stats["answered"] == 3


def test_failures_map_to_rcodes_and_only_facts_about_the_name_are_cached() -> None:
    clock = FakeClock()
    srv, up = server({"sf.test": "servfail", "to.test": "timeout", "nd.test": "no_address"}, clock)
    assert ask(srv, "nx.test").header.rcode == RCODE.NXDOMAIN
    assert ask(srv, "nx.test").header.rcode == RCODE.NXDOMAIN
    assert up.queries_sent == 1  # the second NXDOMAIN came from the negative cache
    nodata = ask(srv, "nd.test")
    assert nodata.header.rcode == RCODE.NOERROR and not nodata.rr
    for _ in range(2):
        assert ask(srv, "sf.test").header.rcode == RCODE.SERVFAIL
        assert ask(srv, "to.test").header.rcode == RCODE.SERVFAIL
    assert up.queries_sent == 2 + 4  # SERVFAIL and timeouts were asked again every time
    assert srv.stats()["servfail"] == 4 and srv.stats()["negative_hits"] == 1


def test_other_types_junk_and_udp_truncation() -> None:
    clock = FakeClock()
    srv, _ = server({"many.test": ([f"127.0.1.{i}" for i in range(60)], 300)}, clock)
    assert ask(srv, "many.test", "MX").header.rcode == RCODE.NOTIMP
    assert asyncio.run(srv.answer(b"\x00\x01junk", tcp=False)) is None
    udp = ask(srv, "many.test")
    tcp = ask(srv, "many.test", tcp=True)
    assert udp.header.tc == 1 and not udp.rr and len(tcp.rr) == 60
    stats = srv.stats()
    assert stats["truncated"] == 1 and stats["dropped_junk"] == 1 and stats["notimp"] == 1
