"""robots.txt answers shared by a fleet's nodes through the crawl's HBase store (``fetchers.robots.RobotsShare``).

Table ``{prefix}_robots``: key = the origin (``scheme://host[:port]``), family ``r``: ``r:s`` status (4 bytes),
``r:t`` fetched at (8-byte double, wall-clock seconds), ``r:b`` the body (at most 512 KiB). One row per origin,
overwritten by the newest answer: the host's lease keeps one node on a host at a time, so two nodes rarely
fetch the same robots.txt at once, and if they do both answers are the site's own.
"""

from __future__ import annotations

import threading

from fetchers.robots import MAX_ROBOTS_BYTES, SharedAnswer
from pipeline.storage.factory import from_spec, is_hbase_spec
from pipeline.storage.hbase import HBaseStore
from pipeline.storage.hbase_cells import _D, _I


class HBaseRobotsShare:
    """A ``RobotsShare`` over an ``HBaseStore`` of its own (the node's fetch loop calls it from worker threads;
    a lock keeps the store to one thread at a time, as its contract asks)."""

    def __init__(self, store: HBaseStore) -> None:
        self.store = store
        self._lock = threading.Lock()

    def get_robots(self, origin: str) -> SharedAnswer | None:
        with self._lock:
            row = self.store._call(lambda c: c.table("robots").row(origin.encode()))
        if not row or b"r:s" not in row or b"r:t" not in row:
            return None
        return SharedAnswer(_I.unpack(row[b"r:s"])[0], row.get(b"r:b", b""), _D.unpack(row[b"r:t"])[0])

    def put_robots(self, origin: str, answer: SharedAnswer) -> None:
        cells = {b"r:s": _I.pack(answer.status), b"r:t": _D.pack(answer.fetched_at),
                 b"r:b": answer.body[:MAX_ROBOTS_BYTES]}  # fmt: skip
        with self._lock:
            self.store._put("robots", [(origin.encode(), cells)])

    def close(self) -> None:
        self.store.close()


def open_share(spec: str) -> HBaseRobotsShare | None:
    """A share over a store of its own for an HBase store ``spec``; None for any other store (a SQLite
    crawl shares through ``sqlite_robots``). Blocking: opening waits out a Thrift outage as the store does."""
    if not is_hbase_spec(spec):
        return None
    store = from_spec(spec)
    assert isinstance(store, HBaseStore), spec
    return HBaseRobotsShare(store)
