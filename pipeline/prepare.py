"""Per-result work that needs no crawl state: the journal line and the page's link candidates.

CrawlCore does it itself on the in-process path. A fetch process (``pipeline.fetchproc``) does it on
its own CPU core and attaches the outcome to the result (``FetchResult.prepared``), so that the
core's process only writes the line and checks the candidates against its seen-set. Both paths call
the functions below, so they cannot drift apart.
"""

from __future__ import annotations

from fetchers.records import FetchResult, Prepared
from pipeline import linkfilter, links
from pipeline.journal import journal_line
from pipeline.settings import Settings
from pipeline.urls import Scope, TrapRules


def parsed_page(result: FetchResult, settings: Settings) -> links.ExtractedPage | None:
    """The page's links, or None when the result is not a followable HTML page."""
    if not result.ok or result.nofollow or not result.body:
        return None
    ctype = result.content_type.split(";")[0].strip().lower()
    if ctype not in settings.fetch.parse_content_types:
        return None
    # Anchor texts feed the jobs' reducer, not the crawl; skipping them halves extraction.
    return links.extract(
        result.body, base_url=result.final_url or result.url, content_type=result.content_type, max_anchor=0
    )


def candidates(
    result: FetchResult, page: links.ExtractedPage, *, scope: Scope, traps: TrapRules, settings: Settings
) -> list[linkfilter.Candidate]:
    return linkfilter.candidates(
        result.url, result.final_url or result.url, result.depth, page,
        scope=scope, traps=traps, max_depth=settings.scope.max_depth,
    )  # fmt: skip


def prepare(
    result: FetchResult, *, scope: Scope, traps: TrapRules, settings: Settings, with_links: bool = True
) -> Prepared:
    """What the core would compute from ``result`` alone (see the module docstring). Without
    ``with_links`` only the journal line: the core then parses the page itself."""
    if not with_links:
        return Prepared(journal_line(result))
    page = parsed_page(result, settings)
    if page is None:
        return Prepared(journal_line(result), links=[])
    cands = candidates(result, page, scope=scope, traps=traps, settings=settings)
    source = cands[0].source if cands else ""
    return Prepared(journal_line(result), source=source, links=[(c.url, c.url_id, c.host) for c in cands])
