"""What a result adds to the crawl db besides its own outcome: the links of its page, and the URLs of
its redirect chain (pipeline/crawl/redirects.py), buffered until the crawl core publishes them.

Publishing keeps one order: the URLs a redirect chain requested enter the crawl db settled first,
then the buffered links, so a link to a URL fetched as a hop is known by then and never queued. A
link to a redirect target claimed by a chain still in flight is dropped at once. Used from the crawl
core's thread only.
"""

from __future__ import annotations

from collections.abc import Callable

from fetchers.records import FetchResult
from pipeline.crawl.redirects import RedirectBook
from pipeline.frontier.dedup import SeenFilter
from pipeline.frontier.frontier import Frontier
from pipeline.links import filtering, prepare
from pipeline.links.extract import ExtractedPage, Link
from pipeline.observe.stats import CrawlStats
from pipeline.settings import Settings
from pipeline.storage.base import Outcome, Store, UrlRecord
from pipeline.urls import Scope, TrapRules


class Discoveries:
    """Buffered links and redirect-chain URLs of one crawl; ``publish`` writes them (see the module)."""

    def __init__(self, settings: Settings, store: Store, seen: SeenFilter, frontier: Frontier, stats: CrawlStats,
                 scope: Scope, traps: TrapRules) -> None:  # fmt: skip
        self.settings, self.store, self.seen, self.frontier, self.stats = (
            settings,
            store,
            seen,
            frontier,
            stats,
        )
        self.scope, self.traps = scope, traps
        self.redirects = RedirectBook(scope, traps, known=self._known, publish=self._publish_links)
        self._new: list[UrlRecord] = []  # links found, not yet in the seen-set
        self._settled: list[tuple[list[UrlRecord], list[Outcome]]] = []  # chains' requested URLs
        self._outcomes: list[Outcome] = []  # outcomes of settled rows added by a gate's publish
        # Told the fingerprints of new URLs once the seen-set's table holds them for good (so that
        # ``known_many`` answers True for them from then on): parse processes drop such links from what
        # they hand back (pipeline/embedded/parseproc.py), sparing this process the look-ups.
        self.on_known: Callable[[list[int]], None] | None = None

    @property
    def buffered(self) -> bool:
        return bool(self._new or self._settled or self._outcomes)

    def boosted_links_of(self, result: FetchResult) -> None:
        """``links_of`` in a crawl with plugins: the links a plugin gave a priority get it as extra in-links,
        and those it gave meta carry it to the crawl db (kept there for a URL it adds: the first discovery's)."""
        plugged = result.prepared.plugged if result.prepared is not None else None
        start = len(self._new)
        self.links_of(result)
        if plugged is not None and (plugged.boost or plugged.link_meta):
            boost, meta = plugged.boost or {}, plugged.link_meta or {}
            for rec in self._new[start:]:
                rec.inlinks += boost.get(rec.url_id, 0)
                rec.link_meta = meta.get(rec.url_id, "")

    def links_of(self, result: FetchResult) -> None:
        """Buffer the new links of ``result``'s page (a DONE result)."""
        known_many, claimed = self.seen.known_many, self.redirects.claimed
        prepared = result.prepared
        if prepared is not None and prepared.links is not None:  # a fetch process parsed the page already
            if prepared.links:
                child, source = result.depth + 1, prepared.source
                known = known_many([url_id for _, url_id, _ in prepared.links])
                self._new.extend(
                    UrlRecord(url, url_id, host, child, discovered_from=source, inlinks=1)
                    for (url, url_id, host), seen in zip(prepared.links, known, strict=True)
                    if not seen and not claimed(url_id)
                )
            return
        found = prepared.found if prepared is not None else None  # a parse process found them already
        if found is None:
            found = prepare.found_links(result, self.settings)
        if not found:
            return
        # S5: most links of a site repeat; drop those the LRU or the seen-table knows before building
        # candidates (one vectorised table search per page).
        known = known_many([url_id for _, url_id in found])
        fresh = [Link(url, "", False, url_id) for (url, url_id), seen in zip(found, known, strict=True)
                 if not seen and not claimed(url_id)]  # fmt: skip
        if fresh:
            page = ExtractedPage(fresh)
            cands = prepare.candidates(
                result, page, scope=self.scope, traps=self.traps, settings=self.settings
            )
            self._new.extend(filtering.to_records(cands))

    def chain_of(self, result: FetchResult) -> None:
        """Buffer what a final ``result``'s redirect chain leaves: its requested URLs (settled) and a
        target it stopped at (a link, unless a chain in flight claimed it)."""
        rows, outcomes, target = self.redirects.settled(result)
        if rows:
            self._settled.append((rows, outcomes))
        if target is not None and not self.redirects.claimed(target.url_id):
            self._new.append(target)

    def publish(self) -> list[Outcome]:
        """Write everything buffered; returns the outcomes of the settled rows, for the caller to record
        with its own (``Store.record_results`` after the rows exist)."""
        self._publish_links()
        out, self._outcomes = self._outcomes, []
        return out

    def _publish_links(self) -> None:
        for rows, outcomes in self._settled:
            # Every row gets its outcome, new or not: a crash between the rows (written here) and their
            # outcomes (write-behind) leaves them PENDING, and the replay on resume must settle them
            # (an outcome is applied only while a URL is PENDING, so a finished one is not touched).
            self.seen.add_new(rows)
            self._outcomes.extend(outcomes)
        self._settled = []
        if self._new:
            new = self.seen.add_new(self._new)
            self._new = []
            self.frontier.add(new)
            self.stats.on_discovered(len(new))
            table = self.seen.table
            if self.on_known is not None and new and table is not None and table.complete:
                self.on_known([r.url_id for r in new])

    def _known(self, url_id: int, url: str) -> bool:
        """The seen-set or the store knows ``url`` (a store look-up when the seen-set cannot say)."""
        return self.seen.known_many([url_id])[0] or self.store.get_url(url) is not None
