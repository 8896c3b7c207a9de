"""Which extracted links become crawl candidates. Pure: no I/O, no clock.

S3 step 4: "MapReduce extracts every hyperlink, filters the links, and adds the survivors to the
pending-URL set". This is the filter: it drops nofollow links (all of them on a meta-nofollow page),
links out of scope, links past the depth limit, trap-like URLs and links back to the page itself, and
keeps one candidate per target URL per page (the first occurrence, so its anchor text wins).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass

from pipeline.links.extract import ExtractedPage
from pipeline.storage.base import UrlRecord, UrlState
from pipeline.urls import Scope, TrapRules, fingerprint, host_of, normalize, trap_reason


@dataclass(slots=True)
class Candidate:
    """A URL worth adding to the crawl database, found on ``source`` at ``depth`` (source depth + 1)."""

    url: str
    url_id: int
    host: str
    depth: int
    source: str
    anchor: str = ""
    redirect_hops: int = 0  # a redirect's target: the hops of its chain (``UrlRecord.redirect_hops``)
    link_meta: str = ""  # the meta of a plugin's link to it, or of the link a redirect's chain began at

    def to_record(self, *, inlinks: int = 1) -> UrlRecord:
        """The crawl-db row for this candidate: PENDING, one in-link (or ``inlinks``)."""
        return UrlRecord(
            url=self.url,
            url_id=self.url_id,
            host=self.host,
            depth=self.depth,
            state=UrlState.PENDING,
            discovered_from=self.source,
            inlinks=inlinks,
            redirect_hops=self.redirect_hops,
            link_meta=self.link_meta,
        )


def to_records(candidates: Iterable[Candidate]) -> list[UrlRecord]:
    return [c.to_record() for c in candidates]


def followed(page: ExtractedPage) -> list[tuple[str, int]]:
    """``(url, url_id)`` of every link of ``page`` the crawl may follow, first occurrences in document
    order, before scope, depth, trap or seen-set checks: the page-level rules of ``candidates`` alone
    (none on a meta-nofollow page; a rel=nofollow link only where the same URL also appears plainly).

    A parse process sends these to the crawl core, which checks them against its seen-set first and
    runs ``candidates`` on the new ones only (most links of a site are known: S5)."""
    if page.meta_nofollow:
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
    result_url: str,
    final_url: str,
    depth: int,
    page: ExtractedPage,
    *,
    scope: Scope,
    traps: TrapRules,
    max_depth: int,
    stats: MutableMapping[str, int] | None = None,
) -> list[Candidate]:
    """Candidates from one fetched page, in document order, one per target URL.

    ``depth`` is the fetched page's depth; candidates get ``depth + 1`` and none is produced when
    that exceeds ``max_depth``. ``page.links`` must hold normalized URLs (``pipeline.links.extract.extract``
    guarantees it). When ``stats`` is given, the number of links dropped per reason is added to it
    (keys: nofollow, meta_nofollow, too_deep, self, duplicate, out_of_scope and trap reasons).
    """
    if page.meta_nofollow or depth + 1 > max_depth:
        if stats is not None and page.links:
            key = "meta_nofollow" if page.meta_nofollow else "too_deep"
            stats[key] = stats.get(key, 0) + len(page.links)
        return []
    source = normalize(final_url or result_url) or final_url or result_url
    own = {source, normalize(result_url) or result_url} if result_url else {source}
    seen = set(own)
    out: list[Candidate] = []
    child = depth + 1
    allows = scope.allows
    for link in page.links:
        url = link.url
        reason = ""
        if link.nofollow:
            reason = "nofollow"
        elif url in seen:
            reason = "self" if url in own else "duplicate"
        elif not allows(url):
            reason = "out_of_scope"
        else:
            reason = trap_reason(url, traps)
        if reason:
            if stats is not None:
                stats[reason] = stats.get(reason, 0) + 1
            if reason != "nofollow":  # a nofollow link may still be followed where it appears plainly
                seen.add(url)
            continue
        seen.add(url)
        out.append(Candidate(url, link.url_id or fingerprint(url), host_of(url), child, source, link.anchor))
    return out
