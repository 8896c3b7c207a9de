"""Each redirect hop is re-checked (robots of the hop's host, scope, SSRF guard); corrupt encodings and
DNS timeouts end as clean results. Local recording server + static names; no traffic leaves 127.0.20.x."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fetchers.aio import AioFetcher
from fetchers.h1 import H1Fetcher
from fetchers.testing import LocalSite, StaticResolver, run_urls
from fetchers.threaded import ThreadedFetcher
from pipeline.settings import DnsSettings, Settings
from pipeline.urls import Scope

pytestmark = pytest.mark.integration
FETCHERS = pytest.mark.parametrize("fetcher_cls", [AioFetcher, ThreadedFetcher, H1Fetcher], ids=["aio", "threaded", "h1"])
TABLE = {"a.local.test": ["127.0.20.1"], "b.local.test": ["127.0.20.2"], "x.other.test": ["127.0.20.2"],
         "evil.local.test": ["127.0.0.1"]}  # fmt: skip


def _run(fetcher_cls: type, scenario: Callable[[Any, LocalSite], Awaitable[None]], resolver: Any = None) -> None:
    site = LocalSite(ips=("127.0.20.1", "127.0.20.2"))
    settings = Settings().with_overrides(
        {
            "security": {"allow_networks": ("127.0.20.0/24",)},
            "politeness": {"min_host_delay_s": 0.0},
            "fetch": {"retries": 0},
        }
    )
    scope = Scope.build([], allowed_domains=("local.test",))

    async def go() -> None:
        await site.start()
        try:
            async with fetcher_cls(
                settings, fetcher_id="r", resolver=resolver or StaticResolver(TABLE), scope=scope
            ) as f:
                await scenario(f, site)
        finally:
            await site.stop()

    asyncio.run(go())


@FETCHERS
def test_every_hop_rechecked(fetcher_cls: type) -> None:
    async def scenario(f: Any, site: LocalSite) -> None:
        site.robots["b.local.test"] = (200, "User-agent: *\nDisallow: /secret\n")
        b_secret = site.url("b.local.test", "127.0.20.2", "/secret")
        b_fine = site.url("b.local.test", "127.0.20.2", "/fine")
        out = site.url("x.other.test", "127.0.20.2", "/page")
        evil = f"http://evil.local.test:{site.ports['127.0.20.1']}/"
        start = {
            "robots": site.url("a.local.test", "127.0.20.1", f"/redirect?to={b_secret}"),
            "ok": site.url("a.local.test", "127.0.20.1", f"/redirect?to={b_fine}"),
            "scope": site.url("a.local.test", "127.0.20.1", f"/redirect?to={out}"),
            "ssrf": site.url("a.local.test", "127.0.20.1", f"/redirect?to={evil}"),
            "bad": site.url("a.local.test", "127.0.20.1", "/redirect?to=ftp://a.local.test/x"),
        }
        res, _ = await run_urls(f, list(start.values()))
        r = {k: res[u] for k, u in start.items()}
        assert r["ok"].ok and r["ok"].final_url == b_fine and r["ok"].redirects == [start["ok"]]
        assert r["robots"].error_class == "robots_blocked" and r["robots"].final_url == b_secret
        assert r["scope"].error_class == "out_of_scope" and r["scope"].final_url == out
        assert r["ssrf"].error_class == "ssrf_blocked" and "127.0.0.1" in r["ssrf"].error_message
        assert r["bad"].error_class == "invalid_url" and r["bad"].status == 302
        assert not site.hits_for("/secret") and not [h for h in site.hits if h.host == "x.other.test"]

    _run(fetcher_cls, scenario)


@FETCHERS
def test_corrupt_gzip_is_decode_error(fetcher_cls: type) -> None:
    async def scenario(f: Any, site: LocalSite) -> None:
        u = site.url("a.local.test", "127.0.20.1", "/badgzip")
        res, _ = await run_urls(f, [u])
        assert res[u].error_class == "decode_error" and res[u].status == 200

    _run(fetcher_cls, scenario)


def test_dns_timeout() -> None:
    from pipeline.dns.aiohttp_resolver import AiohttpResolver
    from pipeline.dns.cache_resolver import CachingResolver

    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # bound, never answers: queries time out
    silent.bind(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    try:
        dns = DnsSettings(servers=(f"127.0.0.1:{port}",), timeout_s=0.2, tries=1, negative_ttl_s=0)
        resolver = AiohttpResolver(CachingResolver.from_settings(dns))

        async def scenario(f: Any, site: LocalSite) -> None:
            u = "http://slow.local.test/"
            res, _ = await run_urls(f, [u])
            assert res[u].error_class == "dns_timeout" and res[u].status == 0

        _run(AioFetcher, scenario, resolver=resolver)
    finally:
        silent.close()
