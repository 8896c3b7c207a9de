"""One pass over a fetch result: the journal line, then the page's links as crawl candidates.

The pass, one module per step, each called once in this order and none calling back into an earlier one:

    FetchResult ─ followable? ─> body bytes                              (here)
      extract.extract      HTML bytes -> <a>/<area> hrefs, meta robots, <base>   (lexbor)
      hrefs.Resolver       href text -> (canonical URL, fingerprint)      (all fast paths, memo)
      filtering.candidates nofollow, self, duplicate, scope, depth, traps -> Candidate
      Candidate.to_record  -> UrlRecord (PENDING) for the seen-set and the frontier (crawl core)

``pipeline.urls`` sits under all of them as the definition of a canonical URL; the steps above only
avoid its slow paths. What a parse process hands back, ``found_links``, takes the first and the page-level
part of the third step in one pass (``extract.followed_links``, property-tested against the two). CrawlCore runs the pass itself on the in-process path. A fetch process
(``pipeline.embedded.fetchproc``) or a parse process (``pipeline.embedded.parsechild``) runs it on its
own CPU core and attaches the outcome to the result (``FetchResult.prepared``), so that the core's
process only writes the line and checks the links against its seen-set; with ``recrawl.simhash_bits`` the
page's text simhash is computed there too (``Prepared.simhash``), not on the core's event loop, where
it held back the fetches of a re-crawl that fetched many changed pages. The mrjob link job
(``jobs.logic.page_candidates``) runs the same steps. Every path calls the functions below, so they
cannot drift apart.
"""

from __future__ import annotations

from fetchers.records import FetchResult, Prepared
from pipeline.links import extract, filtering
from pipeline.settings import Settings
from pipeline.storage.journal import journal_parts
from pipeline.urls import Scope, TrapRules


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
    """``filtering.followed`` of ``result``'s page (``extract.followed_links``, in one pass): what a parse
    process hands the core."""
    if not followable(result, settings):
        return []
    return extract.followed_links(result.body, base_url=result.final_url or result.url, content_type=result.content_type)


def candidates(
    result: FetchResult, page: extract.ExtractedPage, *, scope: Scope, traps: TrapRules, settings: Settings
) -> list[filtering.Candidate]:
    return filtering.candidates(
        result.url, result.final_url or result.url, result.depth, page,
        scope=scope, traps=traps, max_depth=settings.scope.max_depth,
    )  # fmt: skip


def page_simhash(result: FetchResult, settings: Settings) -> int:
    """The re-crawl's text simhash of a fetched page when the crawl compares pages by it, else 0."""
    rc = settings.recrawl
    if not (rc.on and rc.simhash_bits > 0 and result.ok and result.body):
        return 0
    from pipeline.links.change import text_simhash  # numpy and the text parser only when asked for

    return text_simhash(result.body, result.content_type)


def prepare_found(result: FetchResult, settings: Settings) -> Prepared:
    """The journal line and ``found_links``: what a parse process (``pipeline.embedded.parseproc``) hands back.
    The core then checks the links against its seen-set and builds candidates of the new ones only."""
    line, packed = journal_parts(result)
    return Prepared(line, packed=packed, found=found_links(result, settings), simhash=page_simhash(result, settings))


def prepare(
    result: FetchResult, *, scope: Scope, traps: TrapRules, settings: Settings, with_links: bool = True
) -> Prepared:
    """What the core would compute from ``result`` alone (see the module docstring). Without
    ``with_links`` only the journal line: the core then parses the page itself."""
    line, packed = journal_parts(result)
    simhash = page_simhash(result, settings)
    if not with_links:
        return Prepared(line, packed=packed, simhash=simhash)
    page = parsed_page(result, settings)
    if page is None:
        return Prepared(line, links=[], packed=packed, simhash=simhash)
    cands = candidates(result, page, scope=scope, traps=traps, settings=settings)
    source = cands[0].source if cands else ""
    return Prepared(line, source=source, links=[(c.url, c.url_id, c.host) for c in cands], packed=packed,
                    simhash=simhash)  # fmt: skip
