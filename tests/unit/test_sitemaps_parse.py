"""pipeline/links/sitemaps.py: parsing, limits, lastmod, robots lines, the walk, and hostile input (fuzzed)."""

from __future__ import annotations

import gzip
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.links.sitemaps import (
    ERRORS,
    SitemapEntry,
    SitemapFile,
    SitemapLimits,
    SitemapWalk,
    parse_lastmod,
    parse_sitemap,
    robots_sitemaps,
    same_site,
)

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
BASE = "http://a.example:8080"


def urlset(*entries: str, ns: str = NS) -> bytes:
    xmlns = f' xmlns="{ns}"' if ns else ""
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset{xmlns}>{"".join(entries)}</urlset>'.encode()


def url(loc: str, extra: str = "") -> str:
    return f"<url><loc>{loc}</loc>{extra}</url>"


def index(*locs: str) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc><lastmod>2026-01-02</lastmod></sitemap>" for loc in locs)
    return f'<sitemapindex xmlns="{NS}">{items}</sitemapindex>'.encode()


def test_urlset_entries_with_every_field() -> None:
    data = urlset(
        url(f"{BASE}/a", "<lastmod>2026-11-24T08:41:05+00:00</lastmod><changefreq>Daily</changefreq>"),
        url(
            f" {BASE}/b?x=1 ",
            "<priority>0.8</priority><image:image xmlns:image='i'><image:loc>z</image:loc></image:image>",
        ),
        url(f"{BASE}/c", "<priority>7</priority><lastmod>garbage</lastmod>"),
    )
    f = parse_sitemap(data, url=f"{BASE}/sitemap.xml")
    assert f.kind == "urlset" and f.error is None
    assert f.entries == [
        SitemapEntry(f"{BASE}/a", 1795509665.0, "daily", None),
        SitemapEntry(f"{BASE}/b?x=1", None, None, 0.8),
        SitemapEntry(f"{BASE}/c", None, None, None),
    ]


def test_namespace_is_not_required_and_entities_of_xml_itself_work() -> None:
    f = parse_sitemap(urlset(url(f"{BASE}/a?x=1&amp;y=2"), ns=""), url="u")
    assert [e.loc for e in f.entries] == [f"{BASE}/a?x=1&y=2"]


def test_index_lists_child_sitemaps() -> None:
    f = parse_sitemap(index(f"{BASE}/s1.xml", f"{BASE}/s2.xml.gz"), url="u")
    assert f.kind == "index" and [e.loc for e in f.sitemaps] == [f"{BASE}/s1.xml", f"{BASE}/s2.xml.gz"]
    assert f.entries == [] and f.sitemaps[0].lastmod == parse_lastmod("2026-01-02")


def test_gzip_is_detected_by_its_magic() -> None:
    data = urlset(url(f"{BASE}/a"), url(f"{BASE}/b"))
    f = parse_sitemap(gzip.compress(data), url="u.xml.gz")
    assert [e.loc for e in f.entries] == [f"{BASE}/a", f"{BASE}/b"] and f.error is None
    assert f.bytes_read == len(data)


def test_text_sitemap() -> None:
    f = parse_sitemap(f"{BASE}/a\r\n\n{BASE}/b\nnot a url\n".encode(), url="u.txt")
    assert f.kind == "text" and [e.loc for e in f.entries] == [f"{BASE}/a", f"{BASE}/b"] and f.invalid == 1


def test_scope_and_invalid_locs_are_dropped_and_counted() -> None:
    data = urlset(
        url(f"{BASE}/in"),
        url("http://b.example:8080/out"),
        url("https://a.example:8080/scheme"),
        url("http://a.example:8081/port"),
        url("/relative"),
        url("javascript:alert(1)"),
        url(f"{BASE}/{'x' * 3000}"),
        "<url><lastmod>2020</lastmod></url>",
    )
    f = parse_sitemap(data, url=f"{BASE}/s.xml", in_scope=same_site(f"{BASE}/s.xml"))
    assert [e.loc for e in f.entries] == [f"{BASE}/in"]
    assert f.off_scope == 3 and f.invalid == 4


def test_count_limit_keeps_the_entries_before_it() -> None:
    data = urlset(*(url(f"{BASE}/{k}") for k in range(30)))
    f = parse_sitemap(data, url="u", limits=SitemapLimits(max_urls=10))
    assert f.error == "over_count" and len(f.entries) == 10


def test_size_limit_counts_uncompressed_bytes() -> None:
    data = urlset(*(url(f"{BASE}/{k}") for k in range(300)))
    limits = SitemapLimits(max_bytes=2000)
    for blob in (data, gzip.compress(data)):
        f = parse_sitemap(blob, url="u", limits=limits)
        assert f.error == "over_size" and 0 < len(f.entries) < 300 and f.bytes_read == 2000


def test_gzip_bomb_stops_at_the_limit() -> None:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    blob = c.compress(b"<urlset>") + b"".join(c.compress(b" " * (1 << 20)) for _ in range(64)) + c.flush()
    f = parse_sitemap(blob, url="u", limits=SitemapLimits(max_bytes=4 << 20))
    assert f.error == "over_size" and f.bytes_read == 4 << 20


def test_bad_and_hostile_xml_give_a_clean_error() -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
        b"<urlset><url><loc>http://x/&b;</loc></url></urlset>"
    )
    external = (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY e SYSTEM "file:///etc/passwd">]><urlset>&e;</urlset>'
    )
    cases = {
        b"<urlset><url><loc>http://x/</loc></url": "bad_xml",
        b"<urlset><url></urlset>": "bad_xml",
        laughs: "bad_xml",
        external: "bad_xml",
        b"<html><body>no</body></html>": "not_sitemap",
        b"": "bad_xml",  # no element found
        b"   ": "bad_xml",
        b"\x00\x01\x02": "bad_xml",
        b"\x1f\x8b\x08\x00garbage": "bad_gzip",
        gzip.compress(urlset(url(f"{BASE}/a")))[:-12]: "bad_gzip",
    }
    for data, error in cases.items():
        f = parse_sitemap(data, url="u")
        assert f.error == error, (data[:40], f.error, f.detail)
        assert f.error in ERRORS


def test_lastmod_forms() -> None:
    assert parse_lastmod("2026") == parse_lastmod("2026-01-01") == parse_lastmod("2026-01-01T00:00:00Z")
    assert parse_lastmod("2026-11") == parse_lastmod("2026-11-01T00:00+00:00")
    assert parse_lastmod("2026-11-24T10:00:00+02:00") == parse_lastmod("2026-11-24T08:00:00Z")
    assert parse_lastmod("2026-11-24T08:00:00.5Z") == parse_lastmod("2026-11-24T08:00:00Z") + 0.5  # type: ignore[operator]
    assert parse_lastmod("2026-11-24T08:00:00") == parse_lastmod("2026-11-24T08:00:00Z")  # no zone: UTC
    for bad in ("", "yesterday", "2026-13-01", "2026-02-30", "9" * 80, "2026-11-24T25:00Z", "0000"):
        assert parse_lastmod(bad) is None, bad


def test_robots_sitemap_lines() -> None:
    txt = (
        "User-agent: *\nDisallow: /x\nSitemap: http://A.example:8080/s.xml\nsitemap: http://a.example:8080/s.xml\n"
        "Sitemap: /relative.xml\nSitemap: ftp://a.example/s.xml\nSitemap: https://b.example/i.xml.gz\n"
    )
    assert robots_sitemaps(txt) == ["http://a.example:8080/s.xml", "https://b.example/i.xml.gz"]
    many = "".join(f"Sitemap: http://a.example/{k}.xml\n" for k in range(500))
    assert len(robots_sitemaps(many, limit=100)) == 100
    assert robots_sitemaps("") == []


def _run(walk: SitemapWalk, files: dict[str, bytes]) -> None:
    while (item := walk.next_file()) is not None:
        u, depth = item
        if u not in files:
            walk.failed(u, "http_404")
            continue
        walk.fed(u, depth, parse_sitemap(files[u], url=u, limits=walk.limits))


def test_walk_follows_indexes_within_depth_and_refuses_loops() -> None:
    files = {
        f"{BASE}/root.xml": index(f"{BASE}/a.xml", f"{BASE}/mid.xml", f"{BASE}/root.xml", f"{BASE}/gone.xml"),
        f"{BASE}/a.xml": urlset(url(f"{BASE}/p1"), url(f"{BASE}/p2")),
        f"{BASE}/mid.xml": index(f"{BASE}/deep.xml"),
        f"{BASE}/deep.xml": index(f"{BASE}/deeper.xml"),
        f"{BASE}/deeper.xml": urlset(url(f"{BASE}/never")),
    }
    walk = SitemapWalk(SitemapLimits(max_depth=2))
    walk.add_roots([f"{BASE}/root.xml"])
    _run(walk, files)
    assert set(walk.pages) == {f"{BASE}/p1", f"{BASE}/p2"}
    assert walk.errors == {
        f"{BASE}/root.xml": "loop",
        f"{BASE}/gone.xml": "http_404",
        f"{BASE}/deeper.xml": "depth",
    }


def test_walk_file_budget() -> None:
    files = {f"{BASE}/i.xml": index(*(f"{BASE}/{k}.xml" for k in range(50)))}
    walk = SitemapWalk(SitemapLimits(max_files=10))
    walk.add_roots([f"{BASE}/i.xml"])
    _run(walk, files)
    assert walk.files == 10 and list(walk.errors.values()).count("too_many_files") == 41


def _check(f: SitemapFile, limits: SitemapLimits) -> None:
    assert f.error is None or f.error in ERRORS
    assert len(f.entries) + len(f.sitemaps) <= limits.max_urls
    for e in (*f.entries, *f.sitemaps):
        assert e.loc.startswith(("http://", "https://")) and len(e.loc) <= limits.max_loc_chars


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_fuzz_arbitrary_bytes_never_raise(data: bytes) -> None:
    limits = SitemapLimits(max_urls=50, max_bytes=1500)
    _check(parse_sitemap(data, url="u", limits=limits), limits)
    _check(parse_sitemap(gzip.compress(data), url="u", limits=limits), limits)


_piece = st.sampled_from(
    [
        "<url>", "</url>", "<loc>", "</loc>", "<lastmod>", "</lastmod>", "<sitemap>", "</sitemap>",
        "<urlset>", "</urlset>", "<sitemapindex>", "</sitemapindex>", f"{BASE}/a", "http://x/", "&amp;", "&bad;",
        "<!DOCTYPE x>", "<![CDATA[http://c/]]>", "2026-11-24", "<?xml version='1.0'?>", "\x00", "é", " ", "<",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_piece, max_size=40))
def test_fuzz_sitemap_shaped_text_never_raises(pieces: list[str]) -> None:
    limits = SitemapLimits(max_urls=5, max_bytes=600, max_loc_chars=40)
    data = "".join(pieces).encode()
    _check(parse_sitemap(data, url="u", limits=limits, in_scope=lambda u: "a" in u), limits)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=20))
def test_fuzz_robots_text_never_raises(lines: list[str]) -> None:
    for u in robots_sitemaps("\n".join(f"Sitemap: {x}" for x in lines)):
        assert u.startswith(("http://", "https://"))


def test_keep_partial_false_drops_a_file_with_an_error() -> None:
    data = urlset(*(url(f"{BASE}/{k}") for k in range(30)))
    f = parse_sitemap(data, url="u", limits=SitemapLimits(max_urls=10, keep_partial=False))
    assert f.error == "over_count" and f.entries == []
    bad = parse_sitemap(data[:-20], url="u", limits=SitemapLimits(keep_partial=False))
    assert bad.error == "bad_xml" and bad.entries == []
    assert len(parse_sitemap(data[:-20], url="u").entries) > 0
