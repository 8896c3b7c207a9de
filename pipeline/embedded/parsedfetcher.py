"""``ParsedFetcher``: a fetcher whose results reach the crawl core through a ``ParsePool``.

The pool (``pipeline.embedded.parseproc``) prepares results in parse processes; this wrapper keeps the
core's order of events: a host's early release and the end of a batch wait for the results before them.
"""

from __future__ import annotations

from collections.abc import Callable

from fetchers.protocol import Fetcher
from fetchers.records import Batch, FetchResult
from fetchers.report import BatchReport
from pipeline.embedded.parseproc import ParsePool


class ParsedFetcher:
    """A fetcher whose results reach the crawl through a ``ParsePool`` (the ``Fetcher`` protocol).

    Results go through the pool; the early release of a host and the end of the batch wait for the
    results before them, so the core sees the same order of events as without the pool."""

    def __init__(self, inner: Fetcher, pool: ParsePool) -> None:
        self.inner = inner
        self.pool = pool

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    @property
    def free_slots(self) -> int:
        return int(self.inner.free_slots)

    async def fetch_batch(
        self,
        batch: Batch,
        on_result: Callable[[FetchResult], None],
        *,
        fence: Callable[[], bool] | None = None,
        on_host_done: Callable[[str, float, str], None] | None = None,
    ) -> BatchReport:
        pool = self.pool

        def result(res: FetchResult) -> None:
            pool.submit(res, on_result)

        host_done = None
        if on_host_done is not None:
            done_cb = on_host_done

            def host_done(host: str, delay_s: float, ip: str) -> None:
                pool.defer(lambda: done_cb(host, delay_s, ip))

        try:
            report: BatchReport = await self.inner.fetch_batch(batch, result, fence=fence, on_host_done=host_done)
        except Exception:
            await pool.barrier()  # what it delivered before failing reaches the core before the batch ends
            raise
        await pool.barrier()
        return report
