"""A fetch worker process's fetchers: one per crawl scope, WARC directory and store, built on first use
and kept for the process's life, on its one fetch loop.

Each fetcher records its exchanges as WARC under the crawl's directory when the dispatcher asks for
WARC (the wire's bytes: requests as sent, heads as received), and shares robots.txt answers with the
other nodes through the crawl's store (``robotsshares.py``). All of them share the process's one
caching resolver. The pool also answers S1's q for the heartbeat: the free slots of the fetchers that
batches use, in all and for each crawl (wire service name) whose batches it has served, since a node
serving two crawls runs one fetcher for each and each crawl's dispatcher should count only its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fetchers import loops
from fetchers.engine import BACKLOG
from fetchers.protocol import Fetcher
from pipeline.settings import Settings
from pipeline.storage.warc import WarcWriter, live_writer
from pipeline.transport.node.robotsshares import RobotsShares
from pipeline.transport.wire.messages import MAX_SERVICES
from pipeline.transport.wire.taskmsg import scope_to_json
from pipeline.urls import Scope

log = logging.getLogger(__name__)

# (settings, node, scope, shared) -> Fetcher; ``shared`` holds the process's one caching resolver and,
# under "archive", the WARC exchange writer this fetcher records to (None: no WARC). The worker's is
# ``fetchers.choice.worker_factory``.
FetcherFactory = Callable[[Settings, str, Scope | None, dict[str, Any]], Fetcher]


class FetcherPool:
    """Used from the node's fetch loop only (``free_slots`` and ``free_by_service`` excepted: snapshots the
    heartbeat reads from the outbox thread)."""

    def __init__(self, settings: Settings, node: str, factory: FetcherFactory) -> None:
        self.settings = settings
        self.node = node
        self._factory = factory
        self._shared: dict[str, Any] = {}
        self._robots_shares = RobotsShares(node)
        self._fetchers: dict[str, Fetcher] = {}
        self._serving: set[str] = set()  # keys of the fetchers a batch has used (not only the warm-up's)
        self._warcs: dict[str, WarcWriter] = {}  # WARC directory -> this node's exchange writer there
        self._by_service: OrderedDict[str, str] = OrderedDict()  # wire service -> its fetcher's key, latest last

    async def get(
        self, scope: Scope | None, *, warc: str = "", store: str = "", serve: bool = True, service: str = ""
    ) -> Fetcher:
        """The fetcher for ``scope``, recording to ``warc``/NODE if ``warc`` and sharing robots.txt
        through ``store``. ``serve``: a batch of the crawl ``service`` will use it (the heartbeat counts
        its free slots), not only the start-up's warm-up."""
        key = hashlib.sha1(json.dumps([scope_to_json(scope), warc, store], sort_keys=True).encode()).hexdigest()
        if serve:
            self._serving.add(key)
            if service:
                self._by_service[service] = key
                self._by_service.move_to_end(service)
                while len(self._by_service) >= MAX_SERVICES:  # room for "" in the heartbeat
                    self._by_service.popitem(last=False)
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            archive = None
            if warc:
                writer = self._warcs.get(warc)
                if writer is None:
                    writer = self._warcs[warc] = live_writer(self.settings, Path(warc) / self.node, self.node)
                archive = writer.write_exchange
            self._shared["archive"] = archive  # read by the factory now (this loop thread only)
            self._shared["robots_share"] = await self._robots_shares.get(store)
            fetcher = self._factory(self.settings, self.node, scope, self._shared)
            await fetcher.start()
            self._fetchers[key] = fetcher
            log.info("node %s: %s for a new scope (%d in this process) on %s", self.node, type(fetcher).__name__,
                     len(self._fetchers), loops.running_kind())  # fmt: skip
        return fetcher

    def free_slots(self) -> int:
        """S1's q: the free slots of the fetchers batches use. The warm-up's fetcher (built at start for
        no scope) is left out once a batch has its own: its idle slots, counted as well, gave every node
        that had served a batch twice a newcomer's q, and a restarted node lost every choice to them.
        Before any fetcher, what one will have (fetchers.engine.BACKLOG x fetch.concurrency)."""
        fetchers = list(self._fetchers.items())
        serving = [f for key, f in fetchers if key in self._serving] or [f for _, f in fetchers]
        return int(sum(f.free_slots for f in serving)) if serving else self._fresh()

    def free_by_service(self) -> dict[str, int]:
        """S1's q for each crawl this node has served (its fetcher's free slots), and under "" what a crawl
        it has no fetcher for would get; empty before any batch."""
        by_service = list(self._by_service.items())
        if not by_service:
            return {}
        out = {service: int(self._fetchers[key].free_slots) for service, key in by_service if key in self._fetchers}
        out[""] = self._fresh()
        return out

    def _fresh(self) -> int:
        """A new fetcher's free slots (fetchers.engine.BACKLOG x fetch.concurrency)."""
        return BACKLOG * self.settings.fetch.concurrency

    async def aclose(self) -> None:
        for fetcher in self._fetchers.values():
            await fetcher.close()
        caching = self._shared.get("caching")
        if caching is not None and hasattr(caching, "aclose"):
            await caching.aclose()
        for writer in self._warcs.values():  # after the fetchers: none writes to it any more
            writer.close()
        self._robots_shares.close()
