"""The HBase store's layout: its tables' families, and how a URL, a page and a re-crawl state are laid out in
rows (``hbase.py`` holds the store's behaviour). Numbers are big-endian, so that keys sort as the numbers do."""

from __future__ import annotations

import json
import struct
from typing import Any

from pipeline.storage.base import PageRecord, Revisit, UrlRecord, UrlState
from pipeline.storage.rowkey import authority_key

# Thrift1's column descriptor turns the block cache off unless asked (HBase's own default is on): without
# it every read of a flushed row decodes its file block again. Bodies (pages:b) are written once and
# rarely read, so they stay out of it.
_CACHED = {"max_versions": 1, "block_cache_enabled": True}
FAMILIES: dict[str, dict[str, dict[str, Any]]] = {
    "crawldb": {"m": {**_CACHED, "bloom_filter_type": "ROW"}, "n": _CACHED},
    "pending": {"p": {**_CACHED, "bloom_filter_type": "NONE"}},
    "pages": {"m": {**_CACHED, "bloom_filter_type": "ROW"}, "b": {"max_versions": 1}},
    "meta": {"m": {"max_versions": 1}, "c": {"max_versions": 1}},
    # Re-crawl due index (issue #23): key = next fetch (8-byte big-endian double) | row_key(url).
    "due": {"d": {"max_versions": 1, "bloom_filter_type": "NONE"}},
    # URLs requeue_due made PENDING again, per host (hbase_revisits.pending_refetches): key = authority |
    # row_key(url). A row outlives its re-fetch (the read drops it): at most one per URL ever due again.
    "refetch": {"r": {"max_versions": 1, "bloom_filter_type": "NONE"}},
    # robots.txt answers shared by the fleet's nodes (hbase_robots.py): key = origin.
    "robots": {"r": {"max_versions": 1}},
}

_Q, _I, _D, _H = struct.Struct(">q"), struct.Struct(">i"), struct.Struct(">d"), struct.Struct(">H")
# m:R is the URL's re-crawl state (JSON), absent for URLs never scheduled.
# m:M is the meta of the plugin link that added the URL (fetchers/linkmeta.py: JSON text), absent = none.
LINK_META = b"m:M"
# m:L is the last link-jobs round that counted the URL's in-links (m:n), absent outside the link jobs: a
# round killed inside its merge is run again under the same id, and skips the URLs it already counted.
LINK_ROUND = b"m:L"
# Blind in-link counts (hbase_inlinks.py): family n holds one cell per link-jobs round (qualifier = the round's
# id, value = the in-links that round found); m:W is the last round folded into m:n. Count = m:n + the n cells
# of rounds after m:W.
INLINKS = b"n"
FOLDED = b"m:W"
URL_COLS = [
    b"m:u",
    b"m:i",
    b"m:h",
    b"m:d",
    b"m:s",
    b"m:f",
    b"m:n",
    b"m:t",
    b"m:c",
    b"m:g",
    b"m:r",
    b"m:e",
    b"m:R",
    b"m:j",
    LINK_META,
    FOLDED,
    INLINKS,
]
# What a frontier refill reads of a pending URL's crawl-db row (``HBaseStore.pending_many``): the host and
# the depth are in the pending row's key already, and every cell read costs its decoding.
REFILL_COLS = [b"m:u", b"m:i", b"m:s", b"m:n", b"m:j", LINK_META, FOLDED, INLINKS]
# The same reads of a crawl db made before family n existed (``HBaseStore`` falls back to read-then-put counts).
LEGACY = {INLINKS, FOLDED}
_REVISIT_FIELDS = ("next_fetch", "interval", "etag", "last_modified", "digest", "simhash", "changes", "fetches",
                   "fetched_at")  # fmt: skip


def _long(value: bytes | None) -> int:
    return _Q.unpack(value)[0] if value else 0


def inlinks_of(row: dict[bytes, bytes]) -> int:
    """A crawl-db row's in-link count: the folded base ``m:n`` plus the blind cells of rounds after ``m:W``."""
    total = _long(row.get(b"m:n"))
    upto = b"n:" + row.get(FOLDED, b"")
    for col, value in row.items():
        if col > upto and col.startswith(b"n:"):
            total += _long(value)
    return total


def url_cells(r: UrlRecord, *, link_round: bytes = b"", blind: bool = False) -> dict[bytes, bytes]:
    """A crawl-db row; ``link_round`` names the link-jobs round whose in-links it holds: as the folded round
    (``FOLDED``) when the round counts ``blind``, else as ``LINK_ROUND`` (read-then-put counts)."""
    cells = {
        b"m:u": r.url.encode(), b"m:i": _Q.pack(r.url_id), b"m:h": r.host.encode(), b"m:d": _I.pack(r.depth),
        b"m:s": bytes([UrlState.PENDING]), b"m:f": r.discovered_from.encode(), b"m:n": _Q.pack(r.inlinks),
        b"m:t": _D.pack(r.fetched_at), b"m:c": _I.pack(r.status), b"m:g": r.signature.encode(),
        b"m:r": _I.pack(r.retries), b"m:e": r.error.encode(),
    }  # fmt: skip
    if r.redirect_hops:  # m:j: the rare redirect target's hops (UrlRecord.redirect_hops); absent = 0
        cells[b"m:j"] = _I.pack(r.redirect_hops)
    if r.link_meta:
        cells[LINK_META] = r.link_meta.encode()
    if link_round:
        cells[FOLDED if blind else LINK_ROUND] = link_round
    return cells


def url_record(row: dict[bytes, bytes]) -> UrlRecord:
    g = row.get
    return UrlRecord(
        g(b"m:u", b"").decode(), _long(g(b"m:i")), g(b"m:h", b"").decode(), _I.unpack(row[b"m:d"])[0],
        UrlState(row[b"m:s"][0]), g(b"m:f", b"").decode(), inlinks_of(row), _D.unpack(row[b"m:t"])[0],
        _I.unpack(row[b"m:c"])[0], g(b"m:g", b"").decode(), _I.unpack(row[b"m:r"])[0], g(b"m:e", b"").decode(),
        revisit_from(g(b"m:R")), _hops(g(b"m:j")), g(LINK_META, b"").decode(),
    )  # fmt: skip


def refill_record(row: dict[bytes, bytes], host: str, depth: int) -> UrlRecord:
    """A PENDING URL of ``host`` at ``depth`` from the ``REFILL_COLS`` of its crawl-db row."""
    return UrlRecord(row[b"m:u"].decode(), _long(row.get(b"m:i")), host, depth, UrlState.PENDING,
                     inlinks=inlinks_of(row), redirect_hops=_hops(row.get(b"m:j")),
                     link_meta=row.get(LINK_META, b"").decode())  # fmt: skip


def _hops(value: bytes | None) -> int:
    return _I.unpack(value)[0] if value else 0


def page_cells(p: PageRecord, url_id: int) -> dict[bytes, bytes]:
    return {
        b"m:u": p.url.encode(), b"m:i": _Q.pack(url_id), b"m:F": p.final_url.encode(),
        b"m:c": _I.pack(p.status), b"m:t": p.content_type.encode(), b"m:T": _D.pack(p.fetched_at),
        b"m:H": json.dumps(p.headers).encode(), b"m:p": p.ip.encode(), b"m:S": _Q.pack(p.serial),
        b"m:x": b"\x01" if p.truncated else b"\x00", b"m:r": json.dumps(p.redirects).encode(), b"b:b": p.body,
    }  # fmt: skip


def page_record(row: dict[bytes, bytes]) -> PageRecord:
    return PageRecord(
        row[b"m:u"].decode(), _long(row[b"m:i"]), row[b"m:F"].decode(), _I.unpack(row[b"m:c"])[0],
        row[b"m:t"].decode(), row.get(b"b:b", b""), _D.unpack(row[b"m:T"])[0], json.loads(row[b"m:H"]),
        row[b"m:p"].decode(), _long(row[b"m:S"]), row[b"m:x"] == b"\x01", json.loads(row[b"m:r"]),
    )  # fmt: skip


def pending_key(host: str, depth: int, key: bytes) -> bytes:
    return authority_key(host) + b"|" + _H.pack(min(max(depth, 0), 0xFFFF)) + key


def revisit_cell(r: Revisit) -> bytes:
    return json.dumps([getattr(r, f) for f in _REVISIT_FIELDS]).encode()


def revisit_from(cell: bytes | None) -> Revisit | None:
    if not cell:
        return None
    values = json.loads(cell)
    return Revisit(**dict(zip(_REVISIT_FIELDS, values, strict=True)))


def due_key(next_fetch: float, key: bytes) -> bytes:
    """The due index's key: URLs sort by next fetch time (non-negative doubles sort as their bytes)."""
    return _D.pack(max(next_fetch, 0.0)) + key
