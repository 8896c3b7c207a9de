"""Helpers for running fetchers against the testbed (tests and ``crawlfleet bench fetch``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp.abc import AbstractResolver

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
