"""Sitemap files of the living web (sitemaps.org protocol 0.9). Pure: bytes from (web, host, path, t).

Which host has what (``Web.sitemap_urls`` puts them in robots.txt):

- i % 3 == 0: ``/sitemap.xml``, a urlset of every normal page and the sitemap-only pages.
- i % 3 == 1: ``/sitemap_index.xml``, an index of ``/sitemaps/0.xml.gz`` (gzip: even pages and the
  sitemap-only pages) and ``/sitemaps/1.xml`` (plain: odd pages).
- i % 3 == 2: no sitemap.
- sitemap-only pages ``/only/{k}`` (``Web.sitemap_only_paths``): 200 leaf pages no page links to.
- ``<lastmod>``: the wall time of the page's last byte change (``living.state(...).modified_at``), as a
  W3C datetime with seconds and ``+00:00``; every fifth page (m % 5 == 4) gives the date only.

Hostile files on host ``HOSTILE_SITEMAP_SLOT % H`` (``HOSTILE_SITEMAPS``, all in its robots.txt) and
what a careful reader does with each (``HOSTILE_EXPECT``):

=======================  ==========================================================  =============
path                     what it is                                                  expected
=======================  ==========================================================  =============
/hs/huge.xml             urlset of 60,000 in-scope URLs                              over_count
/hs/big.xml.gz           valid gzip urlset of ~60 MB uncompressed (~1 MB on wire)    over_size
/hs/bomb.xml.gz          gzip bomb: a urlset's start tag, then 1 GiB of blanks       over_size
/hs/chain/{n}.xml        index whose only entry is /hs/chain/{n+1}.xml, endlessly    depth
/hs/loop.xml             index listing itself                                        loop
/hs/bad.xml              truncated, mismatched XML                                   bad_xml
/hs/laughs.xml           "billion laughs" entity expansion                           bad_xml
/hs/offscope.xml         urlset: 3 in-scope URLs and off-scope ones (other hosts,    3 urls kept
                         ports, schemes, javascript:, relative, overlong)
/hs/notsitemap.xml       well-formed XML whose root is <html>                        not_sitemap
/hs/missing.xml          404                                                         http_404
=======================  ==========================================================  =============
"""

from __future__ import annotations

import functools
import gzip
import struct
import time
import zlib

from pipeline.harness.testbed.living import state
from pipeline.harness.testbed.model import HOSTILE_SITEMAP_SLOT, HOSTILE_SITEMAPS, Web

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
HUGE_URLS = 60_000
BIG_MB = 60
BOMB_MB = 1024
OFFSCOPE_IN = ("/", "/p/0", "/p/1")
HOSTILE_EXPECT = {
    "/hs/huge.xml": "over_count",
    "/hs/big.xml.gz": "over_size",
    "/hs/bomb.xml.gz": "over_size",
    "/hs/chain/0.xml": "depth",
    "/hs/loop.xml": "loop",
    "/hs/bad.xml": "bad_xml",
    "/hs/laughs.xml": "bad_xml",
    "/hs/offscope.xml": "ok",
    "/hs/notsitemap.xml": "not_sitemap",
    "/hs/missing.xml": "http_404",
}
assert set(HOSTILE_EXPECT) == set(HOSTILE_SITEMAPS)

XML = "application/xml"
GZIP = "application/gzip"


def w3c_datetime(wall: float, *, date_only: bool = False) -> str:
    fmt = "%Y-%m-%d" if date_only else "%Y-%m-%dT%H:%M:%S+00:00"
    return time.strftime(fmt, time.gmtime(wall))


def _urlset(entries: list[tuple[str, str | None]]) -> bytes:
    parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{NS}">\n']
    for loc, lastmod in entries:
        last = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
        parts.append(f"<url><loc>{loc}</loc>{last}</url>\n")
    parts.append("</urlset>\n")
    return "".join(parts).encode()


def _index(locs: list[str]) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc></sitemap>\n" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{NS}">\n{items}</sitemapindex>\n'.encode()


def _page_entries(web: Web, i: int, t: float, pages: range) -> list[tuple[str, str | None]]:
    living = web.living
    assert living is not None
    out: list[tuple[str, str | None]] = []
    for m in pages:
        wall = living.wall_time(state(web.seed, i, m, t, mix=living.mix).modified_at)
        out.append((web.url(i, web.page_path(m)), w3c_datetime(wall, date_only=m % 5 == 4)))
    return out


def _only_entries(web: Web, i: int) -> list[tuple[str, str | None]]:
    assert web.living is not None
    since = w3c_datetime(web.living.epoch, date_only=True)
    return [(web.url(i, p), since) for p in web.sitemap_only_paths(i)]


MAX_PER_FILE = 50_000  # the protocol's limit; a bigger web lists its first pages only


def sitemap(web: Web, i: int, path: str, t: float) -> tuple[bytes, str] | None:
    """(body, content type) of sitemap file ``path`` of host i at test time t; None if there is none."""
    if web.living is None:
        return None
    if path.startswith("/hs/") and web.living.hostile_sitemaps and i == HOSTILE_SITEMAP_SLOT % web.hosts:
        return hostile(web, i, path)
    n = min(web.pages, MAX_PER_FILE - 3)
    if i % 3 == 0 and path == "/sitemap.xml":
        return _urlset(_page_entries(web, i, t, range(n)) + _only_entries(web, i)), XML
    if i % 3 == 1:
        if path == "/sitemap_index.xml":
            return _index([web.url(i, "/sitemaps/0.xml.gz"), web.url(i, "/sitemaps/1.xml")]), XML
        if path == "/sitemaps/0.xml.gz":
            body = _urlset(_page_entries(web, i, t, range(0, n, 2)) + _only_entries(web, i))
            return gzip.compress(body, compresslevel=6, mtime=0), GZIP
        if path == "/sitemaps/1.xml":
            return _urlset(_page_entries(web, i, t, range(1, n, 2))), XML
    return None


def hostile(web: Web, i: int, path: str) -> tuple[bytes, str] | None:
    """The hostile sitemap files (module table); None for a path that is not one (-> 404)."""
    if path == "/hs/huge.xml":
        return _huge(web.url(i, "/p/")), XML
    if path == "/hs/big.xml.gz":
        return _big(web.url(i, "/big-sitemap/")), GZIP
    if path == "/hs/bomb.xml.gz":
        return _bomb(), GZIP
    if path.startswith("/hs/chain/") and path.endswith(".xml"):
        n = path[len("/hs/chain/") : -4]
        if n.isdigit() and len(n) < 9:
            return _index([web.url(i, f"/hs/chain/{int(n) + 1}.xml")]), XML
        return None
    if path == "/hs/loop.xml":
        return _index([web.url(i, "/hs/loop.xml")]), XML
    if path == "/hs/bad.xml":
        return (
            f'<?xml version="1.0"?>\n<urlset xmlns="{NS}">\n<url><loc>{web.url(i, "/")}</lo'.encode()
            + b"c></url",
            XML,
        )
    if path == "/hs/laughs.xml":
        return _LAUGHS, XML
    if path == "/hs/offscope.xml":
        return _offscope(web, i), XML
    if path == "/hs/notsitemap.xml":
        return b'<?xml version="1.0"?>\n<html><body><a href="/">not a sitemap</a></body></html>\n', XML
    return None


@functools.lru_cache(maxsize=2)
def _huge(prefix: str) -> bytes:
    return _urlset([(f"{prefix}{k}", None) for k in range(HUGE_URLS)])


@functools.lru_cache(maxsize=2)
def _big(prefix: str) -> bytes:
    """A valid urlset of ~BIG_MB MB, compressed as a stream (the plain bytes are never held)."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    out = [c.compress(f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{NS}">\n'.encode())]
    filler = "x" * 1900  # ~2 KB an entry: the size limit is met before the count limit
    chunk = "".join(f"<url><loc>{prefix}{filler}{k}</loc></url>\n" for k in range(1000)).encode()
    for _ in range(BIG_MB * (1 << 20) // len(chunk) + 1):
        out.append(c.compress(chunk))
    out.append(c.compress(b"</urlset>\n") + c.flush())
    return b"".join(out)


@functools.lru_cache(maxsize=1)
def _bomb() -> bytes:
    """~1 MB of gzip that inflates to a urlset start tag and 1 GiB of blanks (well-formed so far, so
    only a size limit stops a reader). As ``hostile.gzip_bomb``: after a full flush deflate forgets its
    history, so one compressed MiB of blanks is repeated verbatim."""
    head = f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{NS}">\n'.encode()
    blanks = b" " * (1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    start = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(blanks) + c.flush(zlib.Z_FULL_FLUSH)
    tail = c.flush(zlib.Z_FINISH)
    crc = zlib.crc32(head)
    for _ in range(BOMB_MB):
        crc = zlib.crc32(blanks, crc)
    size = (len(head) + (BOMB_MB << 20)) & 0xFFFFFFFF
    return (
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
        + start
        + block * BOMB_MB
        + tail
        + struct.pack("<II", crc, size)
    )


_LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE urlset [\n<!ENTITY a "lollollollollollollollollollol">\n'
    + b"".join(f'<!ENTITY {chr(98 + k)} "{("&" + chr(97 + k) + ";") * 10}">\n'.encode() for k in range(8))
    + f'] >\n<urlset xmlns="{NS}"><url><loc>http://x/&i;</loc></url></urlset>\n'.encode()
)


def _offscope(web: Web, i: int) -> bytes:
    other = (i + 1) % web.hosts if web.hosts > 1 else i
    entries: list[tuple[str, str | None]] = [(web.url(i, p), None) for p in OFFSCOPE_IN]
    off = [
        "http://elsewhere.example/page",
        f"http://site{other}.crawl.test:{web.port}/p/1" if other != i else "http://other.invalid/p/1",
        f"http://site{i}.crawl.test:{web.port + 1}/p/1",
        f"https://site{i}.crawl.test:{web.port}/p/1",
        "javascript:alert(1)",
        "/relative/path",
        "ftp://site0.crawl.test/file",
        f"http://site{i}.crawl.test:{web.port}/{'a' * 3000}",
    ]
    entries += [(u, None) for u in off]
    return _urlset(entries)


def sitemap_truth(web: Web) -> dict[str, object]:
    """What a sitemap reader must find: robots ``Sitemap:`` URLs per host, the sitemap-only pages,
    and the hostile files with their expected outcome (JSON-able)."""
    hostile_host = HOSTILE_SITEMAP_SLOT % web.hosts
    return {
        "robots_sitemaps": {
            web.url(i, "/"): web.sitemap_urls(i) for i in range(web.hosts) if web.sitemap_urls(i)
        },
        "sitemap_only": [web.url(i, p) for i in range(web.hosts) for p in web.sitemap_only_paths(i)],
        "hostile": (
            {web.url(hostile_host, p): e for p, e in HOSTILE_EXPECT.items()}
            if web.living is not None and web.living.hostile_sitemaps
            else {}
        ),
    }
