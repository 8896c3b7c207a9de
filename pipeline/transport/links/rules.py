"""What the fleet's link jobs need of the crawl, as its dispatcher publishes it in the store's meta
(``RULES_KEY``): scope, depth, per-page link limit, trap rules, whether in-links of known URLs are counted, and
the crawl's plugins with where their items go (``ItemRules``).

The dispatcher writes ``CrawlLinkRules.of_crawl(...).to_json()`` when it opens a crawl; ``crawlfleet links``
reads it before its first round, so the jobs always filter (and count) as the crawl that fed them would.

May import: jobs (logic, runner), pipeline.links, pipeline.urls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from jobs.itemargs import ItemArgs
from jobs.logic import traps_arg
from jobs.runner import JobArgs
from pipeline.links.extract import DEFAULT_MAX_LINKS
from pipeline.urls import Scope, TrapRules

RULES_KEY = "fleet.link_rules"


@dataclass(frozen=True, slots=True)
class CrawlLinkRules:
    """What the link jobs need of the crawl: its scope (domains, empty = any; allow and deny patterns),
    depth and per-page link limits, trap rules as ``jobs.logic.traps_arg`` writes them, and
    ``count_inlinks``: whether the crawl-db update raises the in-link counts of known URLs (the frontier's
    priority is by in-links: ``dispatch.priority = "inlinks"``, as the embedded crawl decides it too)."""

    domains: tuple[str, ...]
    max_depth: int
    max_links: int
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    traps: str = ""
    count_inlinks: bool = True
    items: ItemArgs = ItemArgs()  # the crawl's plugins (module:Name specs) and where their items go

    @classmethod
    def of_crawl(
        cls, scope: Scope, traps: TrapRules, *, max_depth: int, count_inlinks: bool = True, items: ItemArgs | None = None
    ) -> CrawlLinkRules:
        """The rules of a crawl with ``scope``, ``traps`` and ``max_depth`` (what its dispatcher publishes)."""
        return cls(tuple(sorted(scope.domains)), max_depth, DEFAULT_MAX_LINKS, tuple(p.pattern for p in scope.allow),
                   tuple(p.pattern for p in scope.deny), traps_arg(traps), count_inlinks, items or ItemArgs())  # fmt: skip

    def to_json(self) -> str:
        return json.dumps({"domains": list(self.domains), "max_depth": self.max_depth, "max_links": self.max_links,
                           "allow": list(self.allow), "deny": list(self.deny), "traps": self.traps,
                           "count_inlinks": self.count_inlinks, "items": self.items.to_json()})  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> CrawlLinkRules:
        """Rules a dispatcher wrote; a crawl opened before ``count_inlinks`` existed counted them (True), and one
        opened before plugins ran none."""
        obj = json.loads(text)
        return cls(tuple(obj["domains"]), int(obj["max_depth"]), int(obj["max_links"]), tuple(obj.get("allow", ())),
                   tuple(obj.get("deny", ())), str(obj.get("traps", "")), bool(obj.get("count_inlinks", True)),
                   ItemArgs.from_json(obj.get("items")))  # fmt: skip

    def job_args(self, *, store: str, batch_size: int, lru_size: int) -> JobArgs:
        return JobArgs(store=store, allowed_domains=self.domains, max_depth=self.max_depth, max_links=self.max_links,
                       batch_size=batch_size, lru_size=lru_size, allow_regex=self.allow, deny_regex=self.deny,
                       traps=self.traps, count_inlinks=self.count_inlinks, items=self.items)  # fmt: skip
