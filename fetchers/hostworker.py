"""One host's share of a batch, drained by a worker of the fetch engine (``fetchers.engine``): results
handed on as each URL ends, the URLs to retry later handed back, the host released early once it has
all its results."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Protocol

from fetchers.batchctx import BatchCtx
from fetchers.records import FetchResult, UrlTask
from fetchers.report import LEASE_LAPSED, RETRY_LATER

log = logging.getLogger("fetchers.engine")


class Engine(Protocol):
    """What a worker needs of ``fetchers.engine.Engine`` (named here so neither module imports the other)."""

    _pending: int

    async def fetch_task(self, task: UrlTask, ctx: BatchCtx) -> FetchResult: ...

    def _result(
        self, task: UrlTask, ctx: BatchCtx, error_class: str = "", message: str = ""
    ) -> FetchResult: ...

    def host_delay(self, host: str, ctx: BatchCtx) -> float: ...


class HostWorker:
    """Drains one host's queue of a batch; several per host up to per-host concurrency."""

    __slots__ = ("engine", "host", "queue", "ctx")

    def __init__(self, engine: Engine, host: str, queue: deque[UrlTask], ctx: BatchCtx) -> None:
        self.engine, self.host, self.queue, self.ctx = engine, host, queue, ctx

    async def run(self, left: list[int]) -> None:
        engine, queue, ctx = self.engine, self.queue, self.ctx
        while queue:
            task = queue.popleft()
            try:
                if ctx.fence is not None and not ctx.fence():
                    res = engine._result(
                        task, ctx, LEASE_LAPSED, "not started: the batch's lease may have lapsed"
                    )
                else:
                    res = await engine.fetch_task(task, ctx)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug must cost one URL, not the batch or the loop
                log.exception("fetch of %s failed unexpectedly", task.url)
                res = engine._result(task, ctx, "internal_error", f"{type(exc).__name__}: {exc}"[:300])
            if res.error_class in RETRY_LATER:
                ctx.unfinished.append(task)
                ctx.held_hosts.add(self.host)
            else:
                ctx.pages += 1
            left[0] -= 1
            engine._pending -= 1
            try:
                ctx.on_result(res)
            except Exception:
                log.exception("on_result failed for %s", task.url)
            if ctx.on_host_done is not None:  # after on_result: a host's results come before its release
                self._count_done(ctx.on_host_done, left[0])

    def _count_done(self, on_host_done: Callable[[str, float, str], None], batch_left: int) -> None:
        """One more result for this worker's host; release the host early once it has all of them,
        unless the batch is ending anyway or a URL of the host was handed back (then the lease ends
        with the batch)."""
        host, ctx = self.host, self.ctx
        host_left = ctx.host_left[host] = ctx.host_left[host] - 1
        if host_left or not batch_left or not host or host in ctx.held_hosts:
            return
        try:
            on_host_done(host, self.engine.host_delay(host, ctx), ctx.host_ips.get(host, ""))
        except Exception:
            log.exception("on_host_done failed for %s", host)
