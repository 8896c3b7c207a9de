"""How URLs join a crawl's pending set other than as links of this process's results: a mixin of ``CrawlCore``.

- ``_add_seeds``: the crawl's seeds at start-up (with the re-crawl's roots: robots and sitemaps);
- ``add_seeds``: URLs a client submits (``crawlfleet submit``), normalized and held to the scope the
  first seeds set;
- ``on_links``: the fleet's link jobs report how many new PENDING URLs of each host they wrote to the store;
- ``restore_pending``: a full re-read of the store's pending counts, for a dispatcher that may have missed
  such a report.

Contract: URLs given here go through the seen-set (never the same URL twice) before the frontier; counts
from the store only tell the frontier to refill from it. Every new URL is counted as discovered, except
what ``restore_pending`` finds (it was counted when the link jobs reported it, or the report was lost).

May import: pipeline.urls, pipeline.storage, pipeline.frontier, pipeline.observe, this room (crawl).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.crawl.revisits import Recrawler
from pipeline.frontier.dedup import SeenFilter
from pipeline.frontier.frontier import Frontier
from pipeline.observe.stats import CrawlStats
from pipeline.storage.base import Store, UrlRecord
from pipeline.urls import Scope, fingerprint, host_of, normalize


class PendingInputs:
    """The inputs half of ``CrawlCore``; the attributes below are the core's own."""

    store: Store
    scope: Scope
    frontier: Frontier
    seen: SeenFilter
    stats: CrawlStats
    recrawl: Recrawler | None

    def _add_seeds(self, seeds: Sequence[str]) -> None:
        records = [UrlRecord(u, fingerprint(u), host_of(u), 0) for u in seeds]
        new = self.seen.add_new(records)
        self.frontier.add(new)
        self.stats.on_discovered(len(new))

    def add_seeds(self, urls: Sequence[str]) -> int:
        """Add URLs submitted by a client (the scope stays as the crawl's first seeds set it)."""
        records = [UrlRecord(u, fingerprint(u), host_of(u), 0) for u in (normalize(x) for x in urls) if u]
        new = self.seen.add_new([r for r in records if self.scope.allows(r.url)])
        self.frontier.add(new)
        self.stats.on_discovered(len(new))
        return len(new)

    def on_links(self, hosts: Mapping[str, int]) -> None:
        """The link jobs added ``hosts[h]`` new PENDING URLs of each host to the store."""
        total = 0
        for host, count in hosts.items():
            self.frontier.add_pending(host, count)
            total += max(0, count)
        self.stats.on_discovered(total)

    def restore_pending(self) -> int:
        """Re-read every host's pending count from the store (the frontier then refills from it).
        For a dispatcher that may have missed a link-jobs report; a full key scan, so not per batch."""
        found = 0
        for host, count in self.store.pending_hosts():
            if self.frontier.refetches_only(host):
                # A capped host of a re-crawl: its new URLs are not the frontier's, its due URLs are.
                count = len(self.store.pending(host, count, refetches_only=True))
            hs = self.frontier.host(host)
            if hs is not None and (hs.leased_to or hs.pending >= count):
                continue  # known (or leased: its refill waits for the lease to end anyway)
            if self.frontier.restore(host, count):  # False: capped, its other URLs stay PENDING for good
                found += count
        return found
