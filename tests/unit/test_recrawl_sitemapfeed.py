"""The sitemaps feed on results given by the test: the Sitemap: lines of a robots.txt the fetcher loaded
(a note on any result of the origin), an index, a gzip urlset, lastmod making a stored page due, and
hostile files as per-file errors."""

from __future__ import annotations

import gzip
from pathlib import Path

from fetchers.records import FetchResult
from fetchers.robotsnote import RobotsNote
from pipeline.crawl.sitemapfeed import SitemapFeed
from pipeline.frontier.schedule import Schedule
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Outcome, Revisit, UrlRecord, UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import Scope, fingerprint

SITE = "http://a.test"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def res(url: str, body: bytes, *, status: int = 200) -> FetchResult:
    return FetchResult(
        url, fingerprint(url), 0, final_url=url, status=status, body=body, body_bytes=len(body)
    )


def urlset(*locs: tuple[str, str]) -> bytes:
    items = "".join(f"<url><loc>{loc}</loc><lastmod>{lm}</lastmod></url>" for loc, lm in locs)
    return f'<?xml version="1.0"?><urlset {NS}>{items}</urlset>'.encode()


def test_robots_index_gzip_pages_lastmod_and_hostile_files(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "crawl.db")
    known = f"{SITE}/known"
    store.add_urls([UrlRecord(known, fingerprint(known), "a.test", 1)])
    store.record_results([Outcome(known, fingerprint(known), UrlState.DONE, 200, 1000.0,
                                  revisit=Revisit(5000.0, 4000.0, digest="d", fetches=1, fetched_at=1000.0))])  # fmt: skip
    feed = SitemapFeed(
        Scope.build([SITE + "/"]), store, schedule=Schedule(RecrawlSettings()), clock=lambda: 2000.0
    )
    page = res(f"{SITE}/", b"<html></html>")
    page.robots = [RobotsNote(SITE, 200, 1000.0, False, ("http://a.test/index.xml", "http://a.test/bad.xml",
                                                          "http://other.test/s.xml"))]  # fmt: skip
    files = feed.on_result(page)
    assert [f.url for f in files] == [f"{SITE}/index.xml", f"{SITE}/bad.xml"]  # off-scope sitemap dropped
    assert feed.on_result(page) == []  # the same robots.txt again (another process loaded it): nothing new
    gone = res(f"{SITE}/x", b"")
    gone.robots = [RobotsNote(SITE, 404, 1000.0, True)]
    assert feed.on_result(gone) == []  # no robots.txt: no sitemaps
    index = f'<sitemapindex {NS}><sitemap><loc>{SITE}/part.xml.gz</loc></sitemap>' \
            f'<sitemap><loc>{SITE}/index.xml</loc></sitemap></sitemapindex>'  # fmt: skip
    children = feed.on_result(res(f"{SITE}/index.xml", index.encode()))
    assert [c.url for c in children] == [f"{SITE}/part.xml.gz"]  # the loop back to the index is refused
    body = gzip.compress(urlset((f"{SITE}/only/1", "2024-01-01"), (known, "1970-01-01T00:25:00Z"),
                                ("http://other.test/p", "2024-01-01")))  # fmt: skip
    pages = feed.on_result(res(f"{SITE}/part.xml.gz", body))
    assert [p.url for p in pages] == [f"{SITE}/only/1", known]  # the off-site entry is dropped
    due = store.get_revisit(known)
    assert due is not None and due.next_fetch == 2000.0  # lastmod (1500) after the copy's fetch (1000)

    assert feed.on_result(res(f"{SITE}/bad.xml", b"<urlset><url><loc>http://a.test/1</loc></url")) == []
    assert feed.on_result(res(f"{SITE}/bad.xml", b"", status=404)) == []
    assert feed.on_result(res(f"{SITE}/not-a-sitemap-file", b"<html/>")) == []  # not one of ours: ignored
    summary = feed.summary()
    errors = summary["errors"]
    assert isinstance(errors, dict)
    assert errors["bad_xml"] == 1 and errors["http_404"] == 1 and errors["loop"] == 1
    assert errors["off_scope_entries"] == 1 and summary["pages_found"] == 2 and summary["lastmod_due"] == 1
    assert summary["robots_read"] == 2
    store.close()
