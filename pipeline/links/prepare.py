"""Per-result work that needs no crawl state: the journal line and the page's link candidates.

CrawlCore does it itself on the in-process path. A fetch process (``pipeline.embedded.fetchproc``) or a parse
process (``pipeline.embedded.parsechild``) does it on its own CPU core and attaches the outcome to the result
(``FetchResult.prepared``), so that the core's process only writes the line and checks the links
against its seen-set. Every path calls the functions below, so they cannot drift apart.
"""

from __future__ import annotations

from fetchers.records import FetchResult, Prepared
from pipeline.links import extract, filtering
from pipeline.settings import Settings
from pipeline.storage.journal import journal_parts
from pipeline.urls import Scope, TrapRules, fingerprint


def followable(result: FetchResult, settings: Settings) -> bool:
    """True when ``result`` is a page whose links the crawl follows (fetched, no nofollow, HTML)."""
    if not result.ok or result.nofollow or not result.body:
        return False
    return result.content_type.split(";")[0].strip().lower() in settings.fetch.parse_content_types


def parsed_page(result: FetchResult, settings: Settings) -> extract.ExtractedPage | None:
    """The page's links, or None when the result is not a followable HTML page."""
    if not followable(result, settings):
        return None
    # Anchor texts feed the jobs' reducer, not the crawl; skipping them halves extraction.
    return extract.extract(
        result.body, base_url=result.final_url or result.url, content_type=result.content_type, max_anchor=0
    )


def found_links(result: FetchResult, settings: Settings) -> list[tuple[str, int]]:
    """``(url, url_id)`` of every link the crawl may follow from ``result``, first occurrences in
    document order, before any scope, trap or seen-set check: none for a meta-nofollow page, and a
    rel=nofollow link only where the same URL also appears plainly (as ``filtering`` rules)."""
    page = parsed_page(result, settings)
    if page is None or page.meta_nofollow:
        return []
    seen: set[str] = set()
    out: list[tuple[str, int]] = []
    for link in page.links:
        url = link.url
        if link.nofollow or url in seen:
            continue
        seen.add(url)
        out.append((url, link.url_id or fingerprint(url)))
    return out


def candidates(
    result: FetchResult, page: extract.ExtractedPage, *, scope: Scope, traps: TrapRules, settings: Settings
) -> list[filtering.Candidate]:
    return filtering.candidates(
        result.url, result.final_url or result.url, result.depth, page,
        scope=scope, traps=traps, max_depth=settings.scope.max_depth,
    )  # fmt: skip


def prepare_found(result: FetchResult, settings: Settings) -> Prepared:
    """The journal line and ``found_links``: what a parse process (``pipeline.embedded.parseproc``) hands back.
    The core then checks the links against its seen-set and builds candidates of the new ones only."""
    line, packed = journal_parts(result)
    return Prepared(line, packed=packed, found=found_links(result, settings))


def prepare(
    result: FetchResult, *, scope: Scope, traps: TrapRules, settings: Settings, with_links: bool = True
) -> Prepared:
    """What the core would compute from ``result`` alone (see the module docstring). Without
    ``with_links`` only the journal line: the core then parses the page itself."""
    line, packed = journal_parts(result)
    if not with_links:
        return Prepared(line, packed=packed)
    page = parsed_page(result, settings)
    if page is None:
        return Prepared(line, links=[], packed=packed)
    cands = candidates(result, page, scope=scope, traps=traps, settings=settings)
    source = cands[0].source if cands else ""
    return Prepared(line, source=source, links=[(c.url, c.url_id, c.host) for c in cands], packed=packed)
