"""What a crawl needs from a fetcher: ``AioFetcher`` and ``ThreadedFetcher`` in a process,
``pipeline.embedded.fetchproc.ProcessFetcher`` in a child process. The fleet's worker runtime and the embedded
engine both drive fetchers through this interface only."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from fetchers.records import Batch, FetchResult
from fetchers.report import BatchReport


class Fetcher(Protocol):
    """What the runtime needs from a fetcher (``fetchers.aio.AioFetcher`` in production)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    @property
    def free_slots(self) -> int: ...

    def fetch_batch(
        self,
        batch: Batch,
        on_result: Callable[[FetchResult], None],
        *,
        fence: Callable[[], bool] | None = None,
        on_host_done: Callable[[str, float, str], None] | None = None,
    ) -> Awaitable[BatchReport]:
        """Run ``batch``; see ``fetchers.engine.Engine.run_batch`` for ``fence`` and ``on_host_done``
        (a fetcher may ignore ``on_host_done``: its hosts are then released when the batch ends)."""
        ...
