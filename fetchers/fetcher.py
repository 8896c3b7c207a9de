"""What a fetcher is around its ``Engine``: the settings and hooks it is made with, the engine's lazy
start over an SSRF-guarded resolver, ``free_slots`` and ``fetch_batch``, and its lifetime.

The fetchers differ only in their transport (``fetchers.exchange.Transport``, the seam httpx calls a
transport): ``AioFetcher`` (aiohttp, many sockets on one loop) and ``ThreadedFetcher`` (requests, one
thread per download) each say how to open and close theirs; every rule (robots, redirects, retries,
pacing) is the engine's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Self

import aiohttp
from aiohttp.abc import AbstractResolver

from fetchers.engine import BACKLOG, Engine
from fetchers.exchange import Transport
from fetchers.guard import GuardedResolver
from fetchers.records import Batch, FetchResult
from fetchers.redirects import RedirectGate, follow_all
from fetchers.report import BatchReport
from fetchers.robots import RobotsShare
from fetchers.wire import Archive
from pipeline.settings import Settings
from pipeline.urls import Scope


class EngineFetcher:
    """``start`` once per process (``fetch_batch`` starts it too); batches may run concurrently.

    ``resolver``: any aiohttp resolver (our ``pipeline.dns.AiohttpResolver`` in production); None means
    aiohttp's default. It is always wrapped in the SSRF guard; a resolver passed in is not closed here.
    ``archive``: called with every exchange as sent and received (``fetchers.wire``), e.g. a WARC writer.
    ``redirect_gate``: asked before each redirect hop (``fetchers.redirects``).
    ``robots_share``: robots.txt answers shared with the fleet's other nodes (``fetchers.robots``).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        fetcher_id: str,
        resolver: AbstractResolver | None = None,
        scope: Scope | None = None,
        clock: Callable[[], float] = time.monotonic,
        archive: Archive | None = None,
        redirect_gate: RedirectGate = follow_all,
        robots_share: RobotsShare | None = None,
    ) -> None:
        self.settings = settings
        self.fetcher_id = fetcher_id
        self._given_resolver = resolver
        self.scope = scope
        self.clock = clock
        self.archive = archive
        self.redirect_gate = redirect_gate
        self.robots_share = robots_share
        self._own_resolver: AbstractResolver | None = None
        self.engine: Engine | None = None

    # --- what a fetcher's transport says ------------------------------------------------------------
    def _guard(self, inner: AbstractResolver) -> GuardedResolver:
        """The SSRF guard around ``inner``, which every connection resolves through."""
        return GuardedResolver(inner, self.settings.security.allow_networks)

    def _open_transport(self, guarded: GuardedResolver) -> Transport:
        raise NotImplementedError

    async def _close_transport(self) -> None:
        raise NotImplementedError

    # --- lifetime -------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.engine is not None:
            return
        inner = self._given_resolver
        if inner is None:
            inner = self._own_resolver = aiohttp.DefaultResolver()
        guarded = self._guard(inner)
        self.engine = Engine(
            self.settings, fetcher_id=self.fetcher_id, transport=self._open_transport(guarded), resolver=guarded,
            scope=self.scope, clock=self.clock, archive=self.archive, redirect_gate=self.redirect_gate,
            robots_share=self.robots_share,
        )  # fmt: skip

    async def close(self) -> None:
        await self._close_transport()
        if self._own_resolver is not None:
            await self._own_resolver.close()
            self._own_resolver = None
        self.engine = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- fetching ---------------------------------------------------------------------------------------
    @property
    def free_slots(self) -> int:
        return BACKLOG * self.settings.fetch.concurrency if self.engine is None else self.engine.free_slots

    async def fetch_batch(
        self,
        batch: Batch,
        on_result: Callable[[FetchResult], None],
        *,
        fence: Callable[[], bool] | None = None,
        on_host_done: Callable[[str, float, str], None] | None = None,
    ) -> BatchReport:
        """Fetch every task; ``on_result`` is called as each URL completes. Never raises (but can be cancelled)."""
        if self.engine is None:
            await self.start()
        assert self.engine is not None
        return await self.engine.run_batch(batch, on_result, fence=fence, on_host_done=on_host_done)
