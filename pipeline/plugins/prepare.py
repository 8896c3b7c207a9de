"""``pipeline.links.prepare``'s pass with plugins: one parse tree for the links and the extractors.

    FetchResult ─ HTML? ─> extract.parse_tree ─┬─ extract.extract_tree   the page's links
                 wanted by an extractor? ──────┴─ PluginSet.run(Page)     items, extra links, errors
      + the extra links (normalized) ─> the URL filters (accept, reject, rewrite)
      ─> Prepared(found | links, items, boost, link meta, plugin errors)

The page's extractors see the meta of the link that found it (``result.link_meta``) as ``Page.meta``; the
meta of the links they yield goes by url_id (the first link with meta to a URL wins) to the crawl db with
each new URL.

What each caller does with it is what it does without plugins: a parse process hands ``prepare_found`` to
the crawl core, a fetch process ``prepare`` (with candidates), the crawl core ``complete``s a result it
must prepare itself, and the fleet's extract job calls ``page_links`` (jobs/plugged.py). A crawl without
plugins never calls this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fetchers.records import FetchResult, PluginOutput, Prepared
from pipeline.links import extract, filtering
from pipeline.links.change import content_digest
from pipeline.links.prepare import candidates, followable
from pipeline.plugins.api import Page
from pipeline.plugins.chain import PageRun, PluginSet
from pipeline.settings import Settings
from pipeline.storage.journal import journal_parts
from pipeline.urls import Scope, TrapRules, fingerprint, normalize


@dataclass(slots=True)
class Plugged:
    """One page through links and plugins: its links (None: not a followable page), the plugins' run
    (None: no extractor wanted it), and the priorities and meta of plugin links by url_id."""

    page: extract.ExtractedPage | None
    run: PageRun | None
    boost: dict[int, int]
    link_meta: dict[int, str] = field(default_factory=dict)


def page_links(
    result: FetchResult, plugins: PluginSet, *, html: bool, max_links: int = extract.DEFAULT_MAX_LINKS,
    max_anchor: int = 0,
) -> Plugged:
    """Parse ``result`` once (``html``: its links are followed) and run the plugins that want it."""
    wanted = not result.error_class and plugins.wants(result.url, result.status, result.content_type, result.body)
    if not html and not wanted:
        return Plugged(None, None, {})  # no page to read a link meta of, none to give
    base = result.final_url or result.url
    held: list[object] = []

    def tree() -> object:
        if not held:
            held.append(extract.parse_tree(result.body, result.content_type))
        return held[0]

    page: extract.ExtractedPage | None = None
    if html:
        try:
            page = extract.extract_tree(tree(), base_url=base, max_links=max_links, max_anchor=max_anchor)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - junk bytes give no links, as extract() promises
            page = extract.ExtractedPage()
    run = None
    if wanted:
        view = Page(url=result.url, final_url=base, status=result.status, headers=result.headers,
                    content_type=result.content_type, body=result.body, digest=content_digest(result.body),
                    fetched_at=result.fetched_at, depth=result.depth, link_meta=result.link_meta,
                    make_text=lambda: extract.decoded_text(result.body, result.content_type), make_tree=tree)  # fmt: skip
        run = plugins.run(view)
    out = Plugged(page, run, {})
    if run is not None and run.links and not result.nofollow:
        if page is None:
            page = out.page = extract.ExtractedPage()
        for url, priority, meta in run.links:
            canon = normalize(url)
            if canon is None:
                continue
            url_id = fingerprint(canon)
            page.links.append(extract.Link(canon, "", False, url_id))
            if priority:
                out.boost[url_id] = max(priority, out.boost.get(url_id, 0))
            if meta:
                out.link_meta.setdefault(url_id, meta)
    if page is not None and plugins.filters and page.links:
        _filter(out, plugins, base)
    return out


def _filter(out: Plugged, plugins: PluginSet, source: str) -> None:
    """The URL filters over the page's links; a rewritten plugin link keeps its priority and meta."""
    assert out.page is not None
    errors = out.run if out.run is not None else PageRun()
    kept = dict(plugins.filter_urls(dict.fromkeys(link.url for link in out.page.links), source, errors))
    links = []
    for link in out.page.links:
        url = kept.get(link.url)
        if url is None:
            continue
        if url != link.url:
            old, link = link.url_id, extract.Link(url, link.anchor, link.nofollow, fingerprint(url))
            if old in out.boost:
                out.boost.setdefault(link.url_id, out.boost.pop(old))
            if old in out.link_meta:
                out.link_meta.setdefault(link.url_id, out.link_meta.pop(old))
        links.append(link)
    out.page.links = links


def _fill(prepared: Prepared, plugged: Plugged) -> Prepared:
    run, boost, meta = plugged.run, plugged.boost or None, plugged.link_meta or None
    if run is None:
        prepared.plugged = PluginOutput(boost=boost, link_meta=meta)
    else:
        prepared.plugged = PluginOutput(run.items, run.count, tuple(run.errors), run.error_count, boost, meta)
    return prepared


def prepare_found(result: FetchResult, settings: Settings, plugins: PluginSet) -> Prepared:
    """``pipeline.links.prepare.prepare_found`` with plugins: the journal line, the followable links (plugin
    links and URL filters included) and the page's items."""
    line, packed = journal_parts(result)
    plugged = page_links(result, plugins, html=followable(result, settings))
    found = filtering.followed(plugged.page) if plugged.page is not None else []
    return _fill(Prepared(line, packed=packed, found=found), plugged)


def prepare(
    result: FetchResult, *, scope: Scope, traps: TrapRules, settings: Settings, plugins: PluginSet,
    with_links: bool = True,
) -> Prepared:
    """``pipeline.links.prepare.prepare`` with plugins (a fetch process's pass). Without ``with_links`` only
    the journal line: the crawl core then ``complete``s the result itself."""
    line, packed = journal_parts(result)
    if not with_links:
        return Prepared(line, packed=packed)
    plugged = page_links(result, plugins, html=followable(result, settings))
    if plugged.page is None:
        return _fill(Prepared(line, links=[], packed=packed), plugged)
    cands = candidates(result, plugged.page, scope=scope, traps=traps, settings=settings)
    source = cands[0].source if cands else ""
    links = [(c.url, c.url_id, c.host) for c in cands]
    return _fill(Prepared(line, source=source, links=links, packed=packed), plugged)


def complete(result: FetchResult, settings: Settings, plugins: PluginSet) -> None:
    """Give ``result`` what the crawl core needs of the plugins when no other process gave it: the whole
    pass when it has no ``prepared``; its links and items when a fetch process left both to the core; its
    items alone when only they are missing. A page quarantined by the parse guard is left alone: it killed
    parser processes, and this one is the crawl's."""
    prepared = result.prepared
    if prepared is None:
        result.prepared = prepare_found(result, settings, plugins)
        return
    if prepared.plugged is not None or prepared.parse_error:
        return
    if prepared.found is None and prepared.links is None:
        plugged = page_links(result, plugins, html=followable(result, settings))
        prepared.found = filtering.followed(plugged.page) if plugged.page is not None else []
        _fill(prepared, plugged)
        return
    _fill(prepared, page_links(result, plugins, html=False))
