"""The SQLite store's re-crawl methods (issue #23), apart from ``sqlite.py`` to keep each module small, as
``hbase_revisits`` is for HBase. See :class:`pipeline.storage.base.Store` for the contracts."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pipeline.storage.base import Revisit, UrlRecord, UrlState
from pipeline.storage.sqlite_schema import (
    _SELECT_DUE,
    _SELECT_INFRA,
    _SELECT_REFETCHES,
    _SELECT_REVISIT,
    _STATE_NAMES,
    _UPSERT_REVISIT_KEEP,
    _url_record,
    revisit_of,
    revisit_row,
)
from pipeline.storage.sqlite_tx import Transaction
from pipeline.urls import fingerprint, fingerprint_range


class SqliteStore(Protocol):
    """What these functions use of ``pipeline.storage.sqlite.SqliteStore`` (a protocol: no import cycle)."""

    _db: sqlite3.Connection

    def _tx(self) -> Transaction: ...
    def _select_in(self, sql: str, ids: Sequence[int]) -> list[Any]: ...
    def _bump(self, hosts: Mapping[str, int], states: Mapping[str, int]) -> None: ...


def requeue_due(self: SqliteStore, now: float, limit: int) -> dict[str, int]:
    if limit <= 0:
        return {}
    with self._tx():
        rows = self._db.execute(_SELECT_DUE, (now, limit)).fetchall()
        if not rows:
            return {}
        ids = [(uid,) for uid, _, _ in rows]
        self._db.executemany("UPDATE urls SET state = 0 WHERE url_id = ?", ids)
        self._db.executemany("UPDATE revisits SET queued = 1 WHERE url_id = ?", ids)
        hosts = Counter(host for _, host, _ in rows)
        states: Counter[str] = Counter({"pending": len(rows)})
        for _, _, state in rows:
            states[_STATE_NAMES[UrlState(state)]] -= 1
        self._bump(hosts, states)
    return dict(hosts)


def pending_refetches(self: SqliteStore, host: str, limit: int) -> list[UrlRecord]:
    """``Store.pending(host, limit, refetches_only=True)``: the host's PENDING robots.txt and sitemap files
    (a partial index of just those), then its due URLs in fingerprint order (one range of the queued
    index). Neither read walks the new URLs of a capped host."""
    infra = [_url_record(row) for row in self._db.execute(_SELECT_INFRA, (host, limit))]
    due = self._db.execute(_SELECT_REFETCHES, (*fingerprint_range(host), host, limit))
    taken = {r.url_id for r in infra}  # a re-fetched sitemap file due again is in both
    return (infra + [r for r in map(_url_record, due) if r.url_id not in taken])[:limit]


def put_revisits(self: SqliteStore, items: Sequence[tuple[str, Revisit]]) -> int:
    by_id = {fingerprint(url): r for url, r in items}
    if not by_id:
        return 0
    with self._tx():
        known = [uid for (uid,) in self._select_in("SELECT url_id FROM urls WHERE url_id IN ({marks})", list(by_id))]
        self._db.executemany(_UPSERT_REVISIT_KEEP, [revisit_row(uid, by_id[uid]) for uid in known])
    return len(known)


def get_revisit(self: SqliteStore, url: str) -> Revisit | None:
    row = self._db.execute(_SELECT_REVISIT, (fingerprint(url),)).fetchone()
    return None if row is None else revisit_of(row)
