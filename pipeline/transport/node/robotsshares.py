"""A fetch node's robots shares: one per crawl store spec, through which the node's fetchers share
robots.txt answers with the other nodes (``fetchers.robots.RobotsShare``): through HBase, or a file beside
a SQLite crawl db (``pipeline.storage.sqlite_robots``). Opened once per spec, off the fetch loop; a share
that cannot be opened now only means this node fetches robots.txt itself.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from pipeline.storage.factory import is_hbase_spec

if TYPE_CHECKING:  # the HBase client is imported by nodes whose crawl uses HBase only
    from pipeline.storage.hbase_robots import HBaseRobotsShare
    from pipeline.storage.sqlite_robots import SqliteRobotsShare

log = logging.getLogger(__name__)


class RobotsShares:
    """The node's shares by store spec. ``get`` on the fetch loop; ``close`` once, at shutdown."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._shares: dict[str, HBaseRobotsShare | SqliteRobotsShare | None] = {}

    async def get(self, store: str) -> HBaseRobotsShare | SqliteRobotsShare | None:
        """The share for ``store`` (None for no store, or one that cannot be opened now)."""
        if not store:
            return None
        if store not in self._shares:
            try:
                share = await asyncio.to_thread(_open, store)
            except Exception as exc:
                log.warning("node %s: robots share on %s unavailable: %s", self.node, store, exc)
                return None
            self._shares[store] = share
            if share is not None:
                log.info("node %s: robots.txt answers shared through %s", self.node, store)
        return self._shares[store]

    def close(self) -> None:
        for share in self._shares.values():
            if share is not None:
                share.close()


def _open(store: str) -> HBaseRobotsShare | SqliteRobotsShare | None:
    """Blocking: the robots share of a store spec (the HBase client is imported only for an HBase one)."""
    if is_hbase_spec(store):
        from pipeline.storage.hbase_robots import open_share

        return open_share(store)
    from pipeline.storage.sqlite_robots import open_share as open_sqlite_share

    return open_sqlite_share(store)
