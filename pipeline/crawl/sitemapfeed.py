"""Sitemaps into the crawl: robots.txt ``Sitemap:`` lines, sitemap files, lastmod.

The files are fetched as ordinary crawl URLs, so politeness, the SSRF guard, retries and the WARC apply to
them as to pages, and with re-crawling on they are re-fetched on their own schedule
(``recrawl.sitemap_interval_s``: a changed sitemap brings its new lastmods). The flow, per origin:

1. the fetcher loads an origin's robots.txt once (the fetch process that first meets the host, or the
   crawl's robots share) and puts what it said on the next result of that origin (``FetchResult.robots``,
   ``fetchers.robotsnote``): its ``Sitemap:`` lines start the origin's ``SitemapWalk``, whichever process
   loaded it, and the files it wants are returned as URLs to crawl. robots.txt itself is never a crawl URL:
   it is fetched once per host, by the fetcher's cache, and again only when its cached answer expires (a
   reload adds the sitemaps it did not list before);
2. a sitemap file's result: parsed (``parse_sitemap``: gzip, index, size and count limits, DTDs refused);
   an index queues its children, a urlset's in-scope pages are returned as URLs to crawl (pages reachable
   only through a sitemap are found that way), and each entry's ``lastmod`` after the stored copy's fetch
   makes that URL due now (``Schedule.on_lastmod``).

A hostile or broken file (bad XML, a bomb, an endless index chain, off-scope entries, a 404) is one
counted, logged per-file error (``errors``); nothing raises. The walk state lives in memory: after a
restart, files already fetched come back only when their own re-fetch is due.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from fetchers.records import FetchResult
from pipeline.frontier.schedule import Schedule
from pipeline.links.sitemaps import SitemapEntry, SitemapWalk, parse_sitemap, same_site, sitemap_urls
from pipeline.settings import Settings
from pipeline.storage.base import SITEMAP_SOURCE, Revisit, Store, UrlRecord
from pipeline.urls import Scope, fingerprint, host_of, normalize

log = logging.getLogger(__name__)

# Content types whose bodies the fetcher must keep for this to work (robots.txt, XML and gzip sitemaps).
SITEMAP_TYPES = ("text/plain", "application/xml", "text/xml", "application/gzip", "application/x-gzip",
                 "application/octet-stream")  # fmt: skip


def keep_sitemap_bodies(settings: Settings) -> Settings:
    """``settings`` whose fetchers keep robots.txt and sitemap bodies when a re-crawl reads sitemaps (the
    embedded crawl's parse step, or a fleet node's segment for the link job), else ``settings`` itself."""
    rc = settings.recrawl
    if not (rc.on and rc.sitemaps):
        return settings
    types = tuple(dict.fromkeys((*settings.fetch.parse_content_types, *SITEMAP_TYPES)))
    return settings.with_overrides({"fetch": {"parse_content_types": types}}, where="sitemaps")


class SitemapFeed:
    """Sitemap discovery for one crawl (see the module docstring)."""

    def __init__(
        self, scope: Scope, store: Store, *, schedule: Schedule | None, clock: Callable[[], float]
    ) -> None:
        self.scope = scope
        self.clock = clock
        self._reported: set[tuple[str, str]] = set()
        self.store = store
        self.schedule = schedule
        self.robots_read = 0  # robots.txt answers whose Sitemap: lines were read
        self._files: dict[str, tuple[str, int]] = {}  # sitemap file URL -> (origin, depth)
        self._walks: dict[str, SitemapWalk] = {}
        self.errors: Counter[str] = Counter()
        self.pages_found = 0
        self.lastmod_due = 0
        self._dated: set[str] = set()  # pages a sitemap lists with a lastmod
        self._asked: set[str] = set()  # pages a lastmod made due, until their next result

    def on_result(self, result: FetchResult) -> list[UrlRecord]:
        """URLs to crawl that ``result`` reveals (sitemap files, pages); [] for any other result."""
        out: list[UrlRecord] = []
        for note in result.robots:  # a robots.txt the fetcher loaded for this result's origin
            if 200 <= note.status < 300:
                self.robots_read += 1
                walk = self._walks.setdefault(note.origin, SitemapWalk())
                # a reloaded robots.txt adds only sitemaps it did not list before
                walk.add_roots(u for u in sitemap_urls(note.sitemaps) if self.scope.allows(u) and u not in walk.seen)
                out += self._next_files(note.origin)
        return out + self._on_file(result)

    def _on_file(self, result: FetchResult) -> list[UrlRecord]:
        url = result.url
        where = self._files.get(url)
        if where is None:
            return []
        origin, depth = where
        walk = self._walks[origin]
        if result.status == 304 and not result.error_class:
            return self._next_files(origin)  # a re-fetch found the file unchanged: nothing new in it
        if result.error_class or result.status != 200:
            why = result.error_class or f"http_{result.status}"
            walk.failed(url, why)
            self._error(url, why)
            return self._next_files(origin)
        parsed = parse_sitemap(result.body, url=url, in_scope=self._in_scope(url))
        if parsed.error is not None:
            self._error(url, parsed.error, parsed.detail)
        if parsed.off_scope:
            self.errors["off_scope_entries"] += parsed.off_scope
        entries = walk.fed(url, depth, parsed)
        for child, err in walk.errors.items():
            if err in ("loop", "depth", "too_many_files") and (child, err) not in self._reported:
                self._reported.add((child, err))
                self._error(child, err)
        self.pages_found += len(entries)
        self._lastmods([e for e in entries if e.lastmod is not None])
        pages = [UrlRecord(e.loc, fingerprint(e.loc), host_of(e.loc), depth + 1, discovered_from=url, inlinks=1)
                 for e in entries]  # fmt: skip
        return pages + self._next_files(origin)

    def summary(self) -> dict[str, object]:
        return {"pages_found": self.pages_found, "lastmod_due": self.lastmod_due, "errors": dict(self.errors),
                "files": len(self._files), "robots_read": self.robots_read}  # fmt: skip

    def _in_scope(self, sitemap_url: str) -> Callable[[str], bool]:
        site = same_site(sitemap_url)
        return lambda loc: site(loc) and self.scope.allows(loc)

    def _next_files(self, origin: str) -> list[UrlRecord]:
        walk = self._walks.get(origin)
        out: list[UrlRecord] = []
        while walk is not None and (nxt := walk.next_file()) is not None:
            file_url, depth = nxt
            url = normalize(file_url)
            if url is None or url in self._files:
                continue
            self._files[url] = (origin, depth)
            out.append(UrlRecord(url, fingerprint(url), host_of(url), 0, discovered_from=SITEMAP_SOURCE))
        return out

    def _lastmods(self, entries: list[SitemapEntry]) -> None:
        """Known URLs whose sitemap lastmod is newer than their stored copy are due now."""
        if self.schedule is None or not entries:
            return
        now = self.clock()
        due: list[tuple[str, Revisit]] = []
        for e in entries:
            prev = self.store.get_revisit(e.loc)
            if prev is not None and e.lastmod is not None:
                moved = self.schedule.on_lastmod(prev, e.lastmod, now=now)
                if moved is not None:
                    due.append((e.loc, moved))
        self._dated.update(e.loc for e in entries if e.lastmod is not None)
        if due:
            self.lastmod_due += self.store.put_revisits(due)
            self._asked.update(url for url, _ in due)

    def dated(self, url: str) -> bool:
        """A sitemap lists ``url`` with a lastmod (its re-fetch can wait for it)."""
        return url in self._dated

    def take_asked(self, url: str) -> bool:
        """Whether a lastmod made ``url`` due (once: its result answers it)."""
        if url in self._asked:
            self._asked.discard(url)
            return True
        return False

    def _error(self, url: str, kind: str, detail: str = "") -> None:
        self.errors[kind] += 1
        log.warning("sitemap %s: %s %s", url[:200], kind, detail[:200])

