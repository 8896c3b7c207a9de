"""Which fetcher a crawl or a worker runs: ``h1`` (the default, event-driven, a lean HTTP/1.1 client:
``fetchers.h1``), ``aio`` (event-driven over aiohttp's client, ``fetchers.aio``) or ``threaded``
(requests-futures, ``fetchers.threaded``: for sites that need requests' transport adapters, proxies or
auth). h1 is the default because it costs a crawl the least CPU per page (``fetchers.h1`` says why). Both obey the same engine (robots, scope, SSRF guard on every hop and
connection, redirects, retries, pacing) and give the same records."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fetchers.redirects import RedirectGate, follow_all, stop_at_redirects

if TYPE_CHECKING:  # the kinds and the default are read by command-line parsers: keep this module light
    from aiohttp.abc import AbstractResolver

    from fetchers.protocol import Fetcher
    from fetchers.robots import RobotsShare
    from fetchers.wire import Archive
    from pipeline.settings import Settings
    from pipeline.urls import Scope

DEFAULT = "h1"
KINDS = ("aio", "threaded", "h1")


def check_kind(kind: str) -> str:
    """``kind`` if it names a fetcher; ValueError naming the choices otherwise (for flag parsing)."""
    if kind not in KINDS:
        raise ValueError(f"unknown fetcher {kind!r}; expected one of: {', '.join(KINDS)}")
    return kind


def make_fetcher(
    kind: str,
    settings: Settings,
    *,
    fetcher_id: str,
    resolver: AbstractResolver | None = None,
    scope: Scope | None = None,
    archive: Archive | None = None,
    clock: Callable[[], float] = time.monotonic,
    redirect_gate: RedirectGate = follow_all,
    robots_share: RobotsShare | None = None,
) -> Fetcher:
    """A fetcher of ``kind`` (see ``KINDS``); ``resolver`` is wrapped in the SSRF guard by either.
    ``redirect_gate``: asked before each redirect hop (``fetchers.redirects``). ``robots_share``: robots.txt
    answers shared with the fleet's other nodes (``fetchers.robots``)."""
    if check_kind(kind) == "threaded":
        from fetchers.threaded import ThreadedFetcher

        return ThreadedFetcher(settings, fetcher_id=fetcher_id, resolver=resolver, scope=scope, archive=archive, clock=clock,
                          redirect_gate=redirect_gate, robots_share=robots_share)  # fmt: skip
    if kind == "h1":
        from fetchers.h1 import H1Fetcher

        return H1Fetcher(settings, fetcher_id=fetcher_id, resolver=resolver, scope=scope, archive=archive, clock=clock,
                         redirect_gate=redirect_gate, robots_share=robots_share)  # fmt: skip
    from fetchers.aio import AioFetcher

    return AioFetcher(settings, fetcher_id=fetcher_id, resolver=resolver, scope=scope, archive=archive, clock=clock,
                          redirect_gate=redirect_gate, robots_share=robots_share)  # fmt: skip


def worker_factory(kind: str) -> Callable[[Settings, str, Scope | None, dict[str, Any]], Fetcher]:
    """A fleet worker's fetcher factory (``pipeline.transport.node.fetcherpool.FetcherFactory``) for ``kind``: every
    fetcher of the process resolves through one caching resolver, kept in ``shared`` as the aio factory
    there keeps it ("caching", "resolver")."""
    check_kind(kind)

    def make(settings: Settings, node: str, scope: Scope | None, shared: dict[str, Any]) -> Fetcher:
        from pipeline.dns.aiohttp_resolver import AiohttpResolver
        from pipeline.dns.cache_resolver import CachingResolver

        if "resolver" not in shared:
            shared["caching"] = CachingResolver.from_settings(settings.dns)
            shared["resolver"] = AiohttpResolver(shared["caching"])
        # A node has no seen-set: it stops at a redirect and the link jobs take the target as a link.
        return make_fetcher(kind, settings, fetcher_id=node, resolver=shared["resolver"], scope=scope,
                            archive=shared.get("archive"), redirect_gate=stop_at_redirects,
                            robots_share=shared.get("robots_share"))

    return make
