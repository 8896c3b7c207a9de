"""The SQLite store's schema and statements: the tables, each statement's text, and row decoding.

Kept apart from ``sqlite.py`` so that the store's module holds its behaviour (transactions, the order
of writes) and this one the shapes it writes. Bump ``SCHEMA_VERSION`` whenever stored rows would
read differently: the store refuses a database of another version instead of mis-reading it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache

from pipeline.storage.base import UrlRecord, UrlState

CHUNK = 500  # SQLite's default bound-parameter limit is far higher; 500 keeps statements small.
SCHEMA_VERSION = "2"  # 2: host-clustered fingerprints (pipeline.urls.fingerprint)
_STATE_NAMES = {s: s.name.lower() for s in UrlState}

_SCHEMA = """
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
CREATE TABLE IF NOT EXISTS host_pending (host TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pages (
    url_id INTEGER PRIMARY KEY, url TEXT NOT NULL, final_url TEXT NOT NULL, status INTEGER NOT NULL,
    content_type TEXT NOT NULL, headers TEXT NOT NULL, codec INTEGER NOT NULL,
    seg INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL, fetched_at REAL NOT NULL,
    ip TEXT NOT NULL, serial INTEGER NOT NULL, truncated INTEGER NOT NULL, redirects TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS serials (id INTEGER PRIMARY KEY CHECK (id = 0), next INTEGER NOT NULL);
"""

_URL_COLS = "url, url_id, host, depth, state, discovered_from, fetched_at, status, signature, retries, error"
_SELECT_URL = (
    "SELECT u.url, u.url_id, u.host, u.depth, u.state, u.discovered_from, s.inlinks, u.fetched_at, "
    "u.status, u.signature, u.retries, u.error FROM urls u JOIN seen s ON s.url_id = u.url_id"
)
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
    url, url_id, host, depth, state, dfrom, inlinks, fetched_at, status, sig, retries, error = row
    return UrlRecord(url, url_id, host, depth, UrlState(state), dfrom, inlinks, fetched_at, status, sig, retries, error)
