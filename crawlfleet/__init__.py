"""crawlfleet from Python: run a crawl, stream its pages and items, read a crawl's pages and items back.

    from crawlfleet import Crawl, Item

    class Titles:                                   # a plugin: any object with extract(page)
        def extract(self, page):
            title = page.tree.css_first("title")
            if title is not None:
                yield Item("title", {"title": title.text(strip=True)})

    crawl = Crawl({"scope": {"max_pages": 50}}, ["https://example.org/"], plugins=[Titles()], out="crawl-out")
    summary = crawl.run(on_page=lambda page: print(page.url, page.status, page.items))

    from crawlfleet import iter_items, iter_pages
    for item in iter_items("crawl-out"):            # every item: {"type", "url", "digest", "item": {...}, ...}
        ...
    for page in iter_pages("crawl-out"):            # every stored page: url, status, headers, text, links
        ...

``Crawl`` runs the embedded crawl (one machine, no services: ``crawlfleet crawl``). The plugin API
(``Page``, ``Item``, ``Link``, ``DropItem`` and the ``Extractor``, ``UrlFilter``, ``ItemPipeline`` protocols) is
docs/PLUGINS.md. The command line, the fleet and the settings are the README.

Importing this package is cheap (plugins import it in every parse process and link-job task): ``Crawl``,
``iter_pages`` and ``iter_items`` load the crawler when first used.

May import: every room of pipeline, fetchers and jobs (it sits above them all, beside pipeline/cli.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.plugins.api import DropItem, Extractor, Item, ItemPipeline, Link, Page, UrlFilter

if TYPE_CHECKING:
    from crawlfleet.crawl import Crawl, PageResult
    from pipeline.export.items import iter_items
    from pipeline.export.pages import iter_pages
    from pipeline.settings import Settings, load_settings

__all__ = ["Crawl", "DropItem", "Extractor", "Item", "ItemPipeline", "Link", "Page", "PageResult", "Settings",
           "UrlFilter", "iter_items", "iter_pages", "load_settings"]  # fmt: skip

_LAZY = {
    "Crawl": "crawlfleet.crawl", "PageResult": "crawlfleet.crawl", "iter_items": "pipeline.export.items",
    "iter_pages": "pipeline.export.pages", "Settings": "pipeline.settings", "load_settings": "pipeline.settings",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crawlfleet' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
