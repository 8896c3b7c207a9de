"""One fetch process of ``pipeline.embedded.fetchproc.ProcessFetcher``: its main loop.

``python -m pipeline.embedded.fetchchild FD`` runs the crawl's fetcher on its own event loop and hands each
result back prepared (``pipeline.links.prepare``): with links when the parent asked for them, parsed under
a ``pipeline.links.guard.ParseGuard``, and without parsing for the URLs the parent names hostile. It holds
no crawl state; see ``fetchproc`` for what a death costs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from fetchers import loops
from fetchers.records import Batch, FetchResult, Prepared
from pipeline.links import guard
from pipeline.settings import Settings
from pipeline.urls import Scope, TrapRules, host_of

if TYPE_CHECKING:  # imported at run time only by a child that shares robots.txt answers
    from pipeline.storage.sqlite_robots import SqliteRobotsShare

log = logging.getLogger(__name__)

_SEND_EVERY = 32  # results per message at most; fewer when the loop goes idle first
_LINGER_S = 0.002


def _child_main(fd: int) -> None:
    """Entry point of a fetch process: ``python -m pipeline.embedded.fetchchild FD`` (FD: its end of the socket pair)."""
    # Ctrl-C reaches the whole process group; the parent decides how the crawl stops and tells us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    import fetchers.aio  # noqa: F401 - the slow imports, while the parent opens its store
    import pipeline.links.prepare  # noqa: F401

    try:
        settings, fetcher_id, scope, traps, parse_links, kind, warc, marker, hostile, robots, plugins = conn.recv()
        parse_guard = guard.ParseGuard(marker, cpu_limit_s=settings.fetch.parse_cpu_limit_s)
        loops.run(_serve(conn, settings, fetcher_id, scope, traps, parse_links=parse_links, kind=kind, warc=warc,
                         parse_guard=parse_guard, hostile=hostile, robots=robots, plugins=plugins),
                  settings.fetch.event_loop)  # fmt: skip
    except EOFError:
        pass
    finally:
        os._exit(0)  # the parent's pipe is our only output; nothing else to flush


class _Outbox:
    """Results go to the parent in small bundles: one pipe message per loop turn, not per page."""

    def __init__(self, conn: Connection, loop: asyncio.AbstractEventLoop, *, gone: Callable[[], None]) -> None:
        self.conn, self.loop, self.gone = conn, loop, gone
        self.items: list[FetchResult] = []
        self.timer: asyncio.TimerHandle | None = None

    def result(self, res: FetchResult) -> None:
        self.items.append(res)
        if len(self.items) >= _SEND_EVERY:
            self.flush()
        elif self.timer is None:
            self.timer = self.loop.call_later(_LINGER_S, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.items:
            items, self.items = self.items, []
            self.send(("results", items))

    def send(self, msg: tuple[Any, ...]) -> None:
        try:
            self.conn.send(msg)
        except OSError:  # the parent is gone
            self.gone()


async def _serve(
    conn: Connection, settings: Settings, fetcher_id: str, scope: Scope, traps: TrapRules, *, parse_links: bool,
    kind: str, warc: str, parse_guard: guard.ParseGuard, hostile: tuple[dict[str, str], dict[str, str]],
    robots: str = "", plugins: Any = None,
) -> None:  # fmt: skip
    from fetchers.choice import make_fetcher
    from fetchers.redirects import stop_at_redirects
    from pipeline.dns.aiohttp_resolver import AiohttpResolver
    from pipeline.dns.cache_resolver import CachingResolver, dns_counters
    from pipeline.links.prepare import prepare
    from pipeline.storage.journal import journal_parts
    from pipeline.storage.warc import live_writer

    loop = asyncio.get_running_loop()
    caching = CachingResolver.from_settings(settings.dns)
    writer = live_writer(settings, warc, fetcher_id) if warc else None
    share = _robots_share(robots)
    fetcher = make_fetcher(kind, settings, fetcher_id=fetcher_id, resolver=AiohttpResolver(caching), scope=scope,
                           archive=writer.write_exchange if writer is not None else None, robots_share=share,
                           redirect_gate=stop_at_redirects)  # no seen-set here: targets go back as links

    def gone() -> None:
        """The parent died (or quit at a second Ctrl-C): stop fetching now (its in-flight batches are
        re-issued on resume), keeping the WARC records written so far whole."""
        if writer is not None:
            writer.close()
        os._exit(0)

    await fetcher.start()
    out = _Outbox(conn, loop, gone=gone)
    stop = asyncio.Event()
    running: set[asyncio.Task[None]] = set()
    halted = [False]  # the crawl is stopping: send no more requests

    def fence() -> bool:
        return not halted[0]

    def on_result(res: FetchResult) -> None:
        try:
            urls, hosts = hostile
            error = (urls.get(res.url) or hosts.get(host_of(res.url), "")) if urls else ""
            if error:  # it (or enough of its host's pages) killed children that parsed it: kept, not parsed
                line, packed = journal_parts(res)
                res.prepared = Prepared(line, packed=packed, links=[], parse_error=error)
            elif parse_links and plugins is not None:  # the crawl's plugins with the links (pipeline/plugins)
                from pipeline.plugins.prepare import prepare as plugged

                with parse_guard.page(res.url_id, res.url):
                    res.prepared = plugged(res, scope=scope, traps=traps, settings=settings, plugins=plugins)
            elif parse_links:
                with parse_guard.page(res.url_id, res.url):
                    res.prepared = prepare(res, scope=scope, traps=traps, settings=settings)
            else:
                res.prepared = prepare(res, scope=scope, traps=traps, settings=settings, with_links=False)
        except Exception:  # the crawl's process does it itself then
            log.exception("preparing %s failed", res.url)
        out.result(res)

    async def run(batch: Batch) -> None:
        try:
            report = await fetcher.fetch_batch(batch, on_result, fence=fence)
        except Exception as exc:
            out.flush()
            out.send(("failed", batch.serial, f"{type(exc).__name__}: {exc}"[:300]))
            return
        out.flush()  # the batch's results before its report
        out.send(("report", batch.serial, report, dns_counters(caching)))

    def readable() -> None:
        try:
            while conn.poll():
                msg = conn.recv()
                if msg[0] == "batch":
                    task = loop.create_task(run(msg[1]))
                    running.add(task)
                    task.add_done_callback(running.discard)
                elif msg[0] == "hostile":
                    hostile[0].update(msg[1][0])
                    hostile[1].update(msg[1][1])
                elif msg[0] == "halt":
                    halted[0] = True
                else:
                    stop.set()
        except (EOFError, OSError):
            gone()

    loop.add_reader(conn.fileno(), readable)
    # uvloop (fetch.event_loop) makes a watched fd non-blocking (libuv's uv_poll_init does); the pipe's
    # sends are blocking writes of whole messages, and one cut short by EAGAIN read as "the parent is gone".
    os.set_blocking(conn.fileno(), True)
    await stop.wait()
    loop.remove_reader(conn.fileno())
    for task in running:
        task.cancel()
    await fetcher.close()
    await caching.aclose()
    if writer is not None:
        writer.close()
    if share is not None:
        share.close()


def _robots_share(path: str) -> SqliteRobotsShare | None:
    """The crawl's robots share (``pipeline.storage.sqlite_robots``) at ``path``; None without one or when it
    cannot be opened (this process then fetches robots.txt itself, as without a share)."""
    if not path:
        return None
    from pipeline.storage.sqlite_robots import SqliteRobotsShare

    try:
        return SqliteRobotsShare(path)
    except Exception as exc:  # noqa: BLE001 - a share only saves fetches
        log.warning("robots share %s unavailable: %s", path, exc)
        return None


if __name__ == "__main__":
    _child_main(int(sys.argv[1]))
