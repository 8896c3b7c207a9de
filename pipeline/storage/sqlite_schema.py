"""The SQLite store's schema and statements: the tables, each statement's text, and row decoding.

Kept apart from ``sqlite.py`` so that the store's module holds its behaviour (transactions, the order
of writes) and this one the shapes it writes. Bump ``SCHEMA_VERSION`` whenever stored rows would
read differently: the store refuses a database of another version instead of mis-reading it.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from typing import Any

from fetchers.bodycodec import unpack_lz4
from pipeline.storage.base import INFRA_SOURCES, SETTLED_STATES, PageRecord, Revisit, UrlRecord, UrlState

CHUNK = 500  # SQLite's default bound-parameter limit is far higher; 500 keeps statements small.
SCHEMA_VERSION = "2"  # 2: host-clustered fingerprints (pipeline.urls.fingerprint)
_STATE_NAMES = {s: s.name.lower() for s in UrlState}
_INFRA = ", ".join(f"'{source}'" for source in INFRA_SOURCES)  # UrlRecord.infra, as an SQL list

_SCHEMA = f"""
-- The seen-set, kept narrow so that the per-link work of add_urls (find + bump in-links) touches
-- few pages. "ins" is the last bump applied; an upsert leaves it > 0 only on the row it inserted.
CREATE TABLE IF NOT EXISTS seen (url_id INTEGER PRIMARY KEY, inlinks INTEGER NOT NULL, ins INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS urls (
    url_id INTEGER PRIMARY KEY, url TEXT NOT NULL, host TEXT NOT NULL, depth INTEGER NOT NULL,
    state INTEGER NOT NULL, discovered_from TEXT NOT NULL,
    fetched_at REAL NOT NULL, status INTEGER NOT NULL, signature TEXT NOT NULL,
    retries INTEGER NOT NULL, error TEXT NOT NULL);
-- Only PENDING rows are indexed: the index shrinks as the crawl proceeds.
CREATE INDEX IF NOT EXISTS urls_pending ON urls(host, depth, url) WHERE state = 0;
-- PENDING robots.txt and sitemap files (UrlRecord.infra): what a capped host may fetch besides its due
-- URLs (pending(refetches_only=True)); created on open, so an older crawl database gains it.
CREATE INDEX IF NOT EXISTS urls_infra ON urls(host) WHERE state = 0 AND discovered_from IN ({_INFRA});
CREATE TABLE IF NOT EXISTS host_pending (host TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pages (
    url_id INTEGER PRIMARY KEY, url TEXT NOT NULL, final_url TEXT NOT NULL, status INTEGER NOT NULL,
    content_type TEXT NOT NULL, headers TEXT NOT NULL, codec INTEGER NOT NULL,
    seg INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL, fetched_at REAL NOT NULL,
    ip TEXT NOT NULL, serial INTEGER NOT NULL, truncated INTEGER NOT NULL, redirects TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS serials (id INTEGER PRIMARY KEY CHECK (id = 0), next INTEGER NOT NULL);
-- Re-crawl state (issue #23), one row per scheduled URL; a table of its own, so a crawl database of an
-- older crawlfleet opens unchanged (the table is simply created) and one-shot crawls never touch it.
-- "queued" = 1 while requeue_due has made the URL PENDING again; only queued = 0 rows are indexed by due time.
CREATE TABLE IF NOT EXISTS revisits (
    url_id INTEGER PRIMARY KEY, next_fetch REAL NOT NULL, interval REAL NOT NULL, etag TEXT NOT NULL,
    last_modified TEXT NOT NULL, digest TEXT NOT NULL, simhash INTEGER NOT NULL, changes INTEGER NOT NULL,
    fetches INTEGER NOT NULL, fetched_at REAL NOT NULL, queued INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS revisits_due ON revisits(next_fetch) WHERE queued = 0;
-- The queued ones by fingerprint: a host's due URLs are one range of it (pending(refetches_only=True)).
CREATE INDEX IF NOT EXISTS revisits_queued ON revisits(url_id) WHERE queued = 1;
-- Redirect hops of the few URLs found as the target of a redirect a fetcher did not follow
-- (UrlRecord.redirect_hops; absent = 0). A table of its own for the same reason as revisits.
CREATE TABLE IF NOT EXISTS redirect_hops (url_id INTEGER PRIMARY KEY, hops INTEGER NOT NULL);
-- The meta of the plugin link that added a URL (UrlRecord.link_meta, fetchers/linkmeta.py; absent = none),
-- written with the URL's row only. A table of its own for the same reason as revisits.
CREATE TABLE IF NOT EXISTS link_meta (url_id INTEGER PRIMARY KEY, meta TEXT NOT NULL);
"""

_URL_COLS = "url, url_id, host, depth, state, discovered_from, fetched_at, status, signature, retries, error"
_URL_RECORD_COLS = (
    "u.url, u.url_id, u.host, u.depth, u.state, u.discovered_from, s.inlinks, u.fetched_at, "
    "u.status, u.signature, u.retries, u.error, h.hops, r.next_fetch, r.interval, r.etag, r.last_modified, "
    "r.digest, r.simhash, r.changes, r.fetches, r.fetched_at, m.meta"
)
_EXTRAS = "LEFT JOIN redirect_hops h ON h.url_id = u.url_id LEFT JOIN link_meta m ON m.url_id = u.url_id"
_SELECT_URL = (
    f"SELECT {_URL_RECORD_COLS} FROM urls u JOIN seen s ON s.url_id = u.url_id "
    f"LEFT JOIN revisits r ON r.url_id = u.url_id {_EXTRAS}"
)
_INSERT_HOPS = "INSERT OR IGNORE INTO redirect_hops (url_id, hops) VALUES (?, ?)"
_INSERT_LINK_META = "INSERT OR IGNORE INTO link_meta (url_id, meta) VALUES (?, ?)"
# A host's PENDING URLs, shallowest first: the literal "state = 0" lets SQLite use the partial index, and
# (depth, url) > (?, ?) seeks in it.
_SELECT_PENDING = f"{_SELECT_URL} WHERE u.state = 0 AND u.host = ? ORDER BY u.depth, u.url LIMIT ?"
_SELECT_PENDING_AFTER = (
    f"{_SELECT_URL} WHERE u.state = 0 AND u.host = ? AND (u.depth, u.url) > (?, ?) ORDER BY u.depth, u.url LIMIT ?"
)
# A host's due URLs made PENDING again (queued = 1), from the host's fingerprint range of the queued index:
# what a capped host may still fetch, read without walking the new URLs it may not (CROSS JOIN: SQLite keeps
# the queued index as the outer loop, where its planner would rather walk the host's pending URLs).
_SELECT_REFETCHES = (
    f"SELECT {_URL_RECORD_COLS} FROM revisits r INDEXED BY revisits_queued CROSS JOIN urls u ON u.url_id = r.url_id "
    f"JOIN seen s ON s.url_id = u.url_id {_EXTRAS} "
    "WHERE r.queued = 1 AND r.url_id BETWEEN ? AND ? AND u.host = ? AND u.state = 0 ORDER BY r.url_id LIMIT ?"
)
_SELECT_INFRA = (
    f"SELECT {_URL_RECORD_COLS} FROM urls u INDEXED BY urls_infra JOIN seen s ON s.url_id = u.url_id "
    f"LEFT JOIN revisits r ON r.url_id = u.url_id {_EXTRAS} "
    f"WHERE u.state = 0 AND u.discovered_from IN ({_INFRA}) AND u.host = ? ORDER BY u.url_id LIMIT ?"
)
_SELECT_PENDING_HOSTS = "SELECT host, n FROM host_pending WHERE n > 0 ORDER BY host LIMIT ?"
# URLs taken per host (DONE 1, FAILED 2, BLOCKED 3, or PENDING again: due, queued = 1), robots.txt and
# sitemap files not counted: a full scan, run on resume with a host cap only.
_SELECT_TAKEN = (
    "SELECT u.host, COUNT(*) FROM urls u LEFT JOIN revisits r ON r.url_id = u.url_id "
    f"WHERE (u.state IN ({', '.join(str(int(s)) for s in SETTLED_STATES)}) OR r.queued = 1) "
    f"AND u.discovered_from NOT IN ({_INFRA}) GROUP BY u.host"
)
_REVISIT_COLS = "next_fetch, interval, etag, last_modified, digest, simhash, changes, fetches, fetched_at"
_UPSERT_REVISIT = (
    f"INSERT OR REPLACE INTO revisits (url_id, {_REVISIT_COLS}, queued) VALUES (?,?,?,?,?,?,?,?,?,?,0)"
)
# A new schedule for a known URL (a sitemap's lastmod): a URL PENDING again stays queued, so it is still
# found as a re-fetch, and requeue_due does not take it a second time.
_UPSERT_REVISIT_KEEP = (
    f"INSERT OR REPLACE INTO revisits (url_id, {_REVISIT_COLS}, queued) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,(SELECT state = 0 FROM urls WHERE url_id = ?1))"
)
_SELECT_REVISIT = f"SELECT {_REVISIT_COLS} FROM revisits WHERE url_id = ?"
# Due DONE (1) or FAILED (2) URLs, earliest first; "queued = 0" lets SQLite use the partial due index.
_SELECT_DUE = (
    "SELECT r.url_id, u.host, u.state FROM revisits r JOIN urls u ON u.url_id = r.url_id "
    "WHERE r.queued = 0 AND r.next_fetch <= ? AND u.state IN (1, 2) ORDER BY r.next_fetch LIMIT ?"
)
_U64 = 1 << 64
_PAGE_COLS = (
    "url, url_id, final_url, status, content_type, codec, seg, off, len, fetched_at, headers, ip, serial, "
    "truncated, redirects"
)
_INSERT_URL = f"INSERT INTO urls ({_URL_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
_INSERT_PAGE = f"INSERT OR REPLACE INTO pages ({_PAGE_COLS}) VALUES ({','.join('?' * 15)})"
_UPSERT_SEEN = (
    "INSERT INTO seen (url_id, inlinks, ins) VALUES {values} "
    "ON CONFLICT(url_id) DO UPDATE SET inlinks = inlinks + excluded.ins, ins = 0 RETURNING url_id, ins"
)
# Known rows untouched: RETURNING then lists only the inserted ones.
_INSERT_SEEN = "INSERT INTO seen (url_id, inlinks, ins) VALUES {values} ON CONFLICT(url_id) DO NOTHING RETURNING url_id, ins"
CODEC_RAW, CODEC_ZLIB, CODEC_LZ4 = 0, 1, 2  # LZ4: lz4.block with the size stored
_BUMP_HOST = (
    "INSERT INTO host_pending (host, n) VALUES (?, ?) ON CONFLICT(host) DO UPDATE SET n = n + excluded.n"
)
_BUMP_COUNTER = (
    "INSERT INTO counters (name, n) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET n = n + excluded.n"
)


@lru_cache(maxsize=CHUNK + 1)
def _marks(n: int) -> str:
    return ",".join("?" * n)


@lru_cache(maxsize=2 * CHUNK + 2)
def _upsert_seen(n: int, count_inlinks: bool) -> str:
    return (_UPSERT_SEEN if count_inlinks else _INSERT_SEEN).format(values=",".join(["(?,?,?)"] * n))


def _chunks(items: Sequence[int]) -> Iterator[Sequence[int]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _url_record(row: tuple) -> UrlRecord:  # type: ignore[type-arg]
    url, url_id, host, depth, state, dfrom, inlinks, fetched_at, status, sig, retries, error, hops = row[:13]
    revisit = revisit_of(row[13:22]) if row[13] is not None else None
    return UrlRecord(
        url,
        url_id,
        host,
        depth,
        UrlState(state),
        dfrom,
        inlinks,
        fetched_at,
        status,
        sig,
        retries,
        error,
        revisit,
        hops or 0,
        row[22] or "",
    )


def revisit_of(row: Sequence[Any]) -> Revisit:
    """A Revisit from the ``_REVISIT_COLS`` of a row (simhash is stored signed: SQLite integers are)."""
    nxt, interval, etag, lm, digest, simhash, changes, fetches, fetched_at = row
    return Revisit(
        float(nxt), float(interval), str(etag), str(lm), str(digest), int(simhash) % _U64,
        int(changes), int(fetches), float(fetched_at),
    )  # fmt: skip


def revisit_row(url_id: int, r: Revisit) -> tuple[object, ...]:
    """The ``_UPSERT_REVISIT`` parameters for ``r``."""
    simhash = r.simhash - _U64 if r.simhash >= 1 << 63 else r.simhash
    return (url_id, r.next_fetch, r.interval, r.etag, r.last_modified, r.digest, simhash, r.changes, r.fetches,
            r.fetched_at)  # fmt: skip


def url_row(r: UrlRecord) -> tuple[object, ...]:
    """The ``_INSERT_URL`` parameters for a new URL: PENDING (state 0) whatever ``r`` says."""
    return (r.url, r.url_id, r.host, r.depth, 0, r.discovered_from, r.fetched_at, r.status, r.signature, r.retries,
            r.error)  # fmt: skip


def encode_body(page: PageRecord, level: int) -> tuple[int, bytes]:
    """(codec, bytes) for the body log: zlib when ``level`` is set, else the journal's LZ4 form when the
    page carries it (already computed, so free, and a fraction of the bytes), else raw."""
    if level:
        return CODEC_ZLIB, zlib.compress(page.body, level)
    if page.body_lz4:
        return CODEC_LZ4, page.body_lz4
    return CODEC_RAW, page.body


def page_row(uid: int, p: PageRecord | None, codec: int, ref: tuple[int, int, int]) -> tuple:  # type: ignore[type-arg]
    """The ``_INSERT_PAGE`` parameters for ``p``, whose body is at ``ref`` (segment, offset, length)."""
    assert p is not None
    return (
        p.url, uid, p.final_url, p.status, p.content_type, codec, *ref,
        p.fetched_at, json.dumps(p.headers), p.ip, p.serial, int(p.truncated), json.dumps(p.redirects),
    )  # fmt: skip


def page_record(row: tuple, read: Callable[[int, int, int], bytes]) -> PageRecord:  # type: ignore[type-arg]
    """A PageRecord from a ``_PAGE_COLS`` row; ``read(segment, offset, length)`` fetches the body bytes."""
    (
        url,
        url_id,
        final_url,
        status,
        ctype,
        codec,
        seg,
        off,
        length,
        fetched_at,
        headers,
        ip,
        serial,
        trunc,
        redir,
    ) = row
    body = read(seg, off, length) if length else b""
    return PageRecord(
        url, url_id, final_url, status, ctype, decode_body(codec, body),
        fetched_at, json.loads(headers), ip, serial, bool(trunc), json.loads(redir),
    )  # fmt: skip


def decode_body(codec: int, data: bytes) -> bytes:
    if codec == CODEC_ZLIB:
        return zlib.decompress(data)
    if codec == CODEC_LZ4:
        return unpack_lz4(data)
    return data
