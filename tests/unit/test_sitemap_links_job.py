"""The link job's sitemap hook (#23 point 4, fleet): robots.txt Sitemap: lines and sitemap bodies in node
segments become pending-set candidates through ``jobs.logic.page_candidates``; hostile files are bounded."""

from __future__ import annotations

import gzip

from fetchers.records import FetchResult
from jobs import logic
from jobs.sitemap_links import sitemap_candidates
from pipeline.storage.base import SITEMAP_SOURCE
from pipeline.urls import fingerprint

SITE = "http://a.test:8080"
RULES = logic.LinkRules.build(allowed_domains=["a.test"], max_depth=6)


def _result(path: str, body: bytes, *, ctype: str, depth: int = 0, status: int = 200) -> FetchResult:
    url = SITE + path
    return FetchResult(
        url, fingerprint(url), depth, final_url=url, status=status, content_type=ctype, body=body
    )


def _urlset(*paths: str) -> bytes:
    locs = "".join(f"<url><loc>{SITE}{p}</loc><lastmod>2026-01-02</lastmod></url>" for p in paths)
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'.encode()


def test_robots_sitemap_lines_become_candidates_one_deeper() -> None:
    robots = f"User-agent: *\nDisallow: /x/\nSitemap: {SITE}/sitemap.xml\nSitemap: http://other.test/s.xml\n"
    got = logic.page_candidates(_result("/robots.txt", robots.encode(), ctype="text/plain"), RULES)
    assert [(c.url, c.depth) for c in got] == [(f"{SITE}/sitemap.xml", 1)]  # other.test is out of scope
    assert [c.source for c in got] == [SITEMAP_SOURCE]  # a sitemap file: the host cap does not count it


def test_urlset_entries_and_gzip_index_children_are_candidates() -> None:
    stats: dict[str, int] = {}
    got = logic.page_candidates(_result("/sitemap.xml", _urlset("/only/0", "/only/1"), ctype="application/xml",
                                        depth=1), RULES, stats=stats)  # fmt: skip
    assert [(c.url, c.depth) for c in got] == [(f"{SITE}/only/0", 2), (f"{SITE}/only/1", 2)]
    assert {c.source for c in got} == {f"{SITE}/sitemap.xml"}  # pages, found on that file
    index = (f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>{SITE}/s/0.xml.gz'
             "</loc></sitemap></sitemapindex>").encode()  # fmt: skip
    children = sitemap_candidates(_result("/sitemap_index.xml", gzip.compress(index), ctype="application/gzip",
                                          depth=1), RULES)  # fmt: skip
    assert children is not None and [c.url for c in children] == [f"{SITE}/s/0.xml.gz"]
    assert [c.to_record().infra for c in children] == [True]
    assert stats["sitemap_urls"] == 2


def test_off_site_entries_bad_xml_and_endless_indexes_are_bounded() -> None:
    stats: dict[str, int] = {}
    off = _urlset("/in").replace(b"</urlset>", b"<url><loc>http://b.test/x</loc></url></urlset>")
    got = sitemap_candidates(_result("/s.xml", off, ctype="text/xml", depth=1), RULES, stats=stats)
    assert got is not None and [c.url for c in got] == [f"{SITE}/in"] and stats["sitemap_off_scope"] == 1
    bad = sitemap_candidates(
        _result("/bad.xml", b"<urlset><url><loc>", ctype="text/xml", depth=1), RULES, stats=stats
    )
    assert bad == [] and stats["sitemap_bad_xml"] == 1
    chain = (f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>{SITE}/c/9.xml'
             "</loc></sitemap></sitemapindex>").encode()  # fmt: skip
    assert sitemap_candidates(_result("/c/8.xml", chain, ctype="text/xml", depth=3), RULES, stats=stats) == []
    assert stats["sitemap_depth"] == 1


def test_other_results_fall_through_to_html_extraction() -> None:
    html = _result("/page", b'<a href="/next">n</a>', ctype="text/html")
    assert sitemap_candidates(html, RULES) is None
    assert [c.url for c in logic.page_candidates(html, RULES)] == [f"{SITE}/next"]
    not_sitemap = _result("/feed.xml", b"<html><body>hi</body></html>", ctype="application/xml")
    assert sitemap_candidates(not_sitemap, RULES) is None
    assert sitemap_candidates(_result("/robots.txt", b"", ctype="text/plain", status=404), RULES) is None


def test_lastmods_of_a_urlset_on_its_own_site_only() -> None:
    from jobs.sitemap_links import sitemap_lastmods

    body = _urlset("/p/0", "/p/1").replace(
        b"</urlset>", b"<url><loc>http://other.test/x</loc><lastmod>2026-01-03</lastmod></url>"
        b"<url><loc>" + SITE.encode() + b"/p/2</loc></url></urlset>"
    )  # fmt: skip
    stats: dict[str, int] = {}
    got = sitemap_lastmods(_result("/sitemap.xml", body, ctype="application/xml"), stats=stats)
    assert [u for u, _ in got] == [f"{SITE}/p/0", f"{SITE}/p/1"]  # no lastmod for /p/2; other.test ignored
    assert {lm for _, lm in got} == {1767312000.0} and stats["sitemap_lastmods"] == 2  # 2026-01-02T00:00Z
    gz = _result("/s.xml.gz", gzip.compress(_urlset("/p/3")), ctype="application/gzip")
    assert [u for u, _ in sitemap_lastmods(gz)] == [f"{SITE}/p/3"]
    robots = f"Sitemap: {SITE}/sitemap.xml\n".encode()
    assert sitemap_lastmods(_result("/robots.txt", robots, ctype="text/plain")) == []
    assert sitemap_lastmods(_result("/sitemap.xml", body, ctype="application/xml", status=404)) == []
    assert sitemap_lastmods(_result("/sitemap.xml", b"<html>not xml", ctype="application/xml")) == []


def test_an_index_gives_at_most_max_files_sitemap_files() -> None:
    """An index's files are not charged to the host cap, so one file cannot make the fleet fetch more of
    them than the embedded walk would for a whole site (``SitemapLimits.max_files``)."""
    many = "".join(f"<sitemap><loc>{SITE}/f/{i}.xml</loc></sitemap>" for i in range(1_200))
    index = f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{many}</sitemapindex>'.encode()
    stats: dict[str, int] = {}
    got = sitemap_candidates(_result("/big_index.xml", index, ctype="application/xml", depth=1), RULES, stats=stats)
    assert got is not None and len(got) == 1_000 and stats["sitemap_too_many_files"] == 200
