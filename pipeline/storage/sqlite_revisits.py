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


def requeue_due(
    self: SqliteStore, now: float, limit: int, *, hosts: Mapping[str, int] | None = None
) -> dict[str, int]:
    if limit <= 0 or (hosts is not None and not any(n > 0 for n in hosts.values())):
        return {}
    with self._tx():
        if hosts is None:
            rows = self._db.execute(_SELECT_DUE, (now, limit)).fetchall()
        else:
            rows = _due_of_hosts(self, now, limit, hosts)
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


def _due_of_hosts(self: SqliteStore, now: float, limit: int, hosts: Mapping[str, int]) -> list[Any]:
    """(url_id, host, state) of the earliest due URLs of ``hosts``, at most ``hosts[h]`` each: one scan,
    ranked per host."""
    wanted = {h: n for h, n in hosts.items() if n > 0}
    marks = ",".join("?" * len(wanted))
    sql = (
        "SELECT url_id, host, state, k FROM (SELECT r.url_id, u.host, u.state, r.next_fetch AS nf, "
        "ROW_NUMBER() OVER (PARTITION BY u.host ORDER BY r.next_fetch) AS k FROM revisits r "
        "JOIN urls u ON u.url_id = r.url_id WHERE r.queued = 0 AND r.next_fetch <= ? AND u.state IN (1, 2) "
        f"AND u.host IN ({marks})) WHERE k <= ? ORDER BY nf"
    )
    rows = self._db.execute(sql, (now, *wanted, max(wanted.values()))).fetchall()
    return [(uid, host, state) for uid, host, state, k in rows if k <= wanted[host]][:limit]


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
