"""The aiohttp adapter's pure path: IP literals come back as they are, with no query."""

from __future__ import annotations

import asyncio

from pipeline.dns.aiohttp_resolver import AiohttpResolver
from pipeline.dns.cache_resolver import CachingResolver, ip_literal
from pipeline.settings import DnsSettings


def test_ip_literal() -> None:
    assert ip_literal("[::1]") == "::1" and ip_literal("10.0.0.1") == "10.0.0.1" and ip_literal("a.b") is None


def test_aiohttp_adapter_returns_ip_literals_without_resolving() -> None:
    resolver = CachingResolver.from_settings(DnsSettings(servers=("127.0.0.1:9",)))
    out = asyncio.run(AiohttpResolver(resolver).resolve("127.0.0.7", 8080))
    assert out == [{"hostname": "127.0.0.7", "host": "127.0.0.7", "port": 8080, "family": 2, "proto": 0,
                    "flags": out[0]["flags"]}]
    assert resolver.stats().queries_sent == 0
