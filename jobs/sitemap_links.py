"""Sitemaps in the fleet's link job (issue #23 point 4): robots.txt ``Sitemap:`` lines and sitemap bodies
from the node segments become candidates for the pending set, as the links of an HTML page do.

The fleet's path: a node's fetcher loads each host's robots.txt once (itself or from the crawl's robots
share) and puts what it said on the next result of that host (``FetchResult.robots``); the link job's
mapper calls ``robots_candidates`` on every result (its ``Sitemap:`` lines become sitemap files to fetch,
whichever node loaded it) and ``sitemap_candidates`` before the HTML extraction. The files are fetched like
any URL (normal politeness, SSRF guard, WARC), their bodies kept in the segment when their type is one the
crawl parses (``SITEMAP_TYPES``). Stateless, so the walk's limits become rules on single results:

- a robots note (any result): its ``Sitemap:`` lines at depth 1, with ``SITEMAP_SOURCE`` as their source
  (sitemap files, which the host cap does not count); a robots.txt fetched as a URL (a crawl db from
  before the notes) the same way;
- a sitemap file (an XML or gzip type, or a path naming a sitemap, and a body ``parse_sitemap`` reads as
  one): a urlset's entries and an index's children, depth + 1. The protocol's size and count limits, gzip
  bombs and DTDs are ``parse_sitemap``'s (an index's files, which the host cap does not count, are also
  cut at ``SitemapLimits.max_files``); entries must be on the sitemap's own site (scheme, host, port:
  the protocol's rule for robots-submitted sitemaps) and in the crawl's scope, depth and trap rules.
  An endless index chain ends at ``SitemapLimits.max_depth`` index levels below the robots.txt (counted
  in crawl depth), a loop at the seen-set.

Returns None for any other result (the caller goes on with HTML extraction). A hostile file gives what was
read before the problem and one counted error per file in ``stats`` (``sitemap_<error>``); nothing raises.

Sitemap ``lastmod`` reaches the fleet's schedule through the crawl-db update job, which reads the same
segments: ``sitemap_lastmods`` gives a urlset's (page, lastmod) pairs on the sitemap's own site, and
``jobs.recrawl.apply_lastmods`` makes each known page whose stored copy is older than its lastmod due at
the sitemap's fetch time (``Schedule.on_lastmod``, as the embedded feed does).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Protocol

from fetchers.records import FetchResult
from pipeline.links.filtering import Candidate
from pipeline.links.sitemaps import SitemapLimits, parse_sitemap, robots_sitemaps, same_site, sitemap_urls
from pipeline.links.sitemaps import is_sitemap_like as sitemap_like
from pipeline.storage.base import SITEMAP_SOURCE
from pipeline.urls import Scope, TrapRules, fingerprint, host_of, normalize, trap_reason


class LinkRules(Protocol):
    """What the hook reads of ``jobs.logic.LinkRules`` (a protocol: logic imports this module, not back)."""

    @property
    def scope(self) -> Scope: ...
    @property
    def traps(self) -> TrapRules: ...
    @property
    def max_depth(self) -> int: ...


_LIMITS = SitemapLimits()


def _path(url: str) -> str:
    rest = url.partition("://")[2]
    return "/" + rest.partition("/")[2].partition("?")[0]


def _count(stats: MutableMapping[str, int] | None, key: str, n: int = 1) -> None:
    if stats is not None and n:
        stats[key] = stats.get(key, 0) + n


def is_sitemap_like(result: FetchResult) -> bool:
    """A result the job reads as robots.txt or a sitemap (by path and type; the body decides later)."""
    return sitemap_like(result.url, result.content_type)


def robots_candidates(
    result: FetchResult, rules: LinkRules, *, stats: MutableMapping[str, int] | None = None
) -> list[Candidate]:
    """The sitemap files that the robots.txt answers on ``result`` name (``FetchResult.robots``: the fetch
    node loaded its origin's robots.txt, itself or from the robots share): files at depth 1, as below a
    robots.txt at depth 0, marked ``SITEMAP_SOURCE``. Any result may carry such a note, a failed one too."""
    found: list[str] = []
    for note in result.robots:
        if 200 <= note.status < 300 and note.sitemaps:
            found += sitemap_urls(note.sitemaps)
    if not found:
        return []
    _count(stats, "sitemap_robots_lines", len(found))
    return _keep(found, 1, SITEMAP_SOURCE, rules.scope, rules.traps, rules.max_depth, stats)


def sitemap_candidates(
    result: FetchResult, rules: LinkRules, *, stats: MutableMapping[str, int] | None = None
) -> list[Candidate] | None:
    """The pending-set candidates a robots.txt or sitemap result names, or None when it is neither."""
    if not result.ok or not result.body or result.status != 200 or not is_sitemap_like(result):
        return None
    url = result.final_url or result.url
    depth = result.depth + 1
    if _path(result.url).lower() == "/robots.txt":
        text = result.body.decode("utf-8", "replace")
        found = robots_sitemaps(text)
        _count(stats, "sitemap_robots_lines", len(found))
        return _keep(found, depth, SITEMAP_SOURCE, rules.scope, rules.traps, rules.max_depth, stats)
    site = same_site(url)
    parsed = parse_sitemap(result.body, url=url, in_scope=lambda loc: site(loc) and rules.scope.allows(loc))
    if parsed.kind == "" and parsed.error == "not_sitemap":
        return None  # an XML document of another kind: the HTML path may still have links in it
    if parsed.error is not None:
        _count(stats, f"sitemap_{parsed.error}")
    _count(stats, "sitemap_off_scope", parsed.off_scope)
    _count(stats, "sitemap_files")
    files: list[str] = []
    if parsed.sitemaps:
        if result.depth > _LIMITS.max_depth:  # robots.txt (0) -> root file (1) -> ... index levels
            _count(stats, "sitemap_depth")
        else:
            files = [e.loc for e in parsed.sitemaps]
        if len(files) > _LIMITS.max_files:  # the embedded walk's bound per site; a stateless job, per file
            _count(stats, "sitemap_too_many_files", len(files) - _LIMITS.max_files)
            files = files[: _LIMITS.max_files]
    # An index's files are marked as sitemap files (not pages: the host cap does not count them), a
    # urlset's entries as pages found on this file, as the embedded crawl's SitemapFeed marks them.
    pages = [e.loc for e in parsed.entries]
    return (_keep(pages, depth, result.url, rules.scope, rules.traps, rules.max_depth, stats)
            + _keep(files, depth, SITEMAP_SOURCE, rules.scope, rules.traps, rules.max_depth, stats))  # fmt: skip


def _keep(
    urls: list[str],
    depth: int,
    source: str,
    scope: Scope,
    traps: TrapRules,
    max_depth: int,
    stats: MutableMapping[str, int] | None,
) -> list[Candidate]:
    if depth > max_depth:
        _count(stats, "sitemap_too_deep", len(urls))
        return []
    allowed: Callable[[str], bool] = scope.allows
    out = []
    for u in dict.fromkeys(urls):
        if allowed(u) and not trap_reason(u, traps):
            out.append(Candidate(u, fingerprint(u), host_of(u), depth, source))
    _count(stats, "sitemap_urls", len(out))
    return out


def sitemap_lastmods(
    result: FetchResult, *, stats: MutableMapping[str, int] | None = None
) -> list[tuple[str, float]]:
    """(normalized page URL, lastmod epoch s) of the entries with a ``lastmod`` of a urlset sitemap result,
    on the sitemap's own site (another site's pages get no say from this file); [] for robots.txt, an
    index, a non-sitemap or a failed result. A broken file gives what was read before the problem."""
    if not result.ok or not result.body or result.status != 200 or not is_sitemap_like(result):
        return []
    if _path(result.url).lower() == "/robots.txt":
        return []
    url = result.final_url or result.url
    parsed = parse_sitemap(result.body, url=url, in_scope=same_site(url))
    out = [(normalize(e.loc) or e.loc, e.lastmod) for e in parsed.entries if e.lastmod is not None]
    _count(stats, "sitemap_lastmods", len(out))
    return out
