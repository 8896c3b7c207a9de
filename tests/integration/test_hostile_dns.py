"""Hostile DNS answers, through the fetcher and our DNS layer (c-ares -> S2 cache -> SSRF guard): the
testbed zone's truncated (TC bit: TCP fallback), garbage (malformed), silent (no answer), servfail and
private (127.0.0.53, outside the allowed 127.0.10.0/24) names. Each must end as a clean error class for
its URL, and must not take other names down with it.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Iterator

import pytest

from fetchers.aio import AioFetcher
from fetchers.testing import bed_resolver, bed_settings, run_urls
from pipeline.dns.cache_resolver import CachingResolver
from pipeline.dns.errors import DnsError
from pipeline.harness.faults import results
from pipeline.harness.testbed.harness import TestbedProcess

pytestmark = pytest.mark.integration

EXPECTED = {
    "truncated": "",  # answered over TCP after the TC bit: resolves, and the web server answers
    "garbage": "dns_malformed",
    "silent": "dns_timeout",
    "servfail": "dns_servfail",
    "private": "ssrf_blocked",
}
GARBAGE_POISONS = (
    "One malformed DNS answer fails every lookup in flight on the same c-ares channel: c-ares treats the bad "
    "reply as a broken connection and ends all its queries with ARES_EBADRESP, so a hostile authoritative "
    "server for ONE name makes unrelated hosts FAILED (dns_malformed), and the negative cache keeps them "
    "failed for dns.negative_ttl_s. Measured: a crawl seeded with 3 testbed hosts + garbage.crawl.test "
    "fetched nothing. Fix (pipeline/dns/resolver.py, _NoQcacheChannel): also set ares_options.udp_max_queries "
    "= 1 with ARES_OPT_UDP_MAX_QUERIES (1 << 19) so each query has its own UDP socket (checked: the other "
    "names then resolve), and/or retry a 'malformed' failure once before caching it."
)


@pytest.fixture(scope="module")
def tb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    with TestbedProcess(3, 3, seed=1, hostile=True, workdir=tmp_path_factory.mktemp("tb-dns")) as t:
        yield t


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_hostile_name_ends_cleanly(tb: TestbedProcess, name: str) -> None:
    settings = bed_settings(tb.dns_server, fetch={"total_timeout_s": 5.0}, dns={"timeout_s": 1.0, "tries": 2},
                            politeness={"min_host_delay_s": 0.0})  # fmt: skip
    url = f"http://{name}.crawl.test:{tb.port}/"

    async def go() -> object:
        async with AioFetcher(settings, fetcher_id="h", resolver=bed_resolver(settings)) as f:
            got, _report = await run_urls(f, [url])
            return got[url]

    tracemalloc.start()
    try:
        res = asyncio.run(go())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    error = getattr(res, "error_class", "internal_error")
    results.append({"type": "hostile", "mode": "fetcher", "input": f"DNS {name}.crawl.test",
                    "outcome": f"status {getattr(res, 'status', 0)}", "error_class": error, "crawl_ok": True,
                    "peak_rss_mb": round(peak / 2**20, 1), "note": "one fetcher and resolver per name"})  # fmt: skip
    assert error == EXPECTED[name], (name, error, getattr(res, "error_message", ""))


def test_garbage_answer_does_not_fail_other_lookups(tb: TestbedProcess) -> None:
    """Was GARBAGE_POISONS; fixed in pipeline/dns/resolver.py (udp_max_queries = 1). Regression test."""
    settings = bed_settings(tb.dns_server, dns={"timeout_s": 1.0, "tries": 2})

    async def go() -> list[object]:
        resolver = CachingResolver.from_settings(settings.dns)
        try:
            names = ["site0.crawl.test", "garbage.crawl.test", "site1.crawl.test", "site2.crawl.test"]
            return await asyncio.gather(*(resolver.resolve(n) for n in names), return_exceptions=True)
        finally:
            await resolver.aclose()

    site0, garbage, site1, site2 = asyncio.run(go())
    assert isinstance(garbage, DnsError) and garbage.kind == "malformed"
    assert site1 == [tb.info["host_ips"]["site1.crawl.test"]] and site2 == [tb.info["host_ips"]["site2.crawl.test"]], (site1, site2)
