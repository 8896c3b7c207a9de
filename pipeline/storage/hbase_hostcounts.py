"""The HBase store's per-host counts for a restart: pending URLs (the frontier's hosts) and URLs taken
(what ``scope.max_pages_per_host`` has counted: URLs fetched at least once). Whole-table scans, run once when a crawl resumes or a
dispatcher restarts, never on the hot path; apart from ``hbase.py`` to keep each module small."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import happybase

from pipeline.storage.base import INFRA_SOURCES, SETTLED_STATES
from pipeline.storage.rowkey import authority_of

_T = TypeVar("_T")
Call = Callable[[Callable[[happybase.Connection], _T]], _T]
_TAKEN = frozenset(SETTLED_STATES)
_INFRA = frozenset(source.encode() for source in INFRA_SOURCES)


def pending_hosts(call: Call[Any], limit: int) -> list[tuple[str, int]]:
    """Exact counts from a key-only scan of the pending table (a pending key starts with its host)."""

    def scan(conn: happybase.Connection) -> list[tuple[str, int]]:
        counts: Counter[bytes] = Counter()
        for key, _ in conn.table("pending").scan(filter=b"KeyOnlyFilter()", batch_size=5000):
            counts[key[: key.index(b"|")]] += 1
            if len(counts) > limit:
                break
        return sorted((authority_of(k), n) for k, n in counts.items())[:limit]

    return list(call(scan))


def taken_per_host(call: Call[Any]) -> dict[str, int]:
    """DONE, FAILED or BLOCKED URLs per host, and PENDING ones with a re-crawl state (fetched, due again),
    robots.txt and sitemap files left out (``UrlRecord.infra``), from a scan of the crawl db's host, state,
    re-crawl and source cells."""

    def scan(conn: happybase.Connection) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for _, row in conn.table("crawldb").scan(columns=[b"m:h", b"m:s", b"m:R", b"m:f"], batch_size=5000):
            state, host = row.get(b"m:s"), row.get(b"m:h")
            if state and host and (state[0] in _TAKEN or b"m:R" in row) and row.get(b"m:f") not in _INFRA:
                counts[host.decode()] += 1
        return dict(counts)

    return dict(call(scan))
