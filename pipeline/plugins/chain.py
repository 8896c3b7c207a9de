"""The loaded plugins, run over one page: extractors, then item pipelines, then each item's JSON line.

``PluginSet.run(page)`` never raises. A plugin that raises costs that page that plugin's output and one
error (``PageRun.errors``: the crawl records it on the page's row and counts it); an item a pipeline
refuses or that cannot be written (not JSON, over ``plugins.item_max_bytes``) costs that item alone, and a
``Link`` whose meta cannot travel (not JSON, over ``fetchers.linkmeta.LINK_META_MAX_BYTES``) that link alone.
The page itself, its links and the other plugins' items are kept. ``filter_urls`` runs the URL filters over a
page's links the same way: a filter that raises leaves the link as it was and records the error.

A ``PluginSet`` is pickled to the embedded crawl's parse and fetch processes (its plugins must be
importable there: a class of ``__main__`` is not, see ``portable``).
"""

from __future__ import annotations

import itertools
import logging
import pickle
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fetchers import linkmeta
from pipeline.plugins.api import DropItem, Item, Link, Page
from pipeline.plugins.records import ItemError, Source, item_line
from pipeline.urls import join, normalize

log = logging.getLogger(__name__)

MAX_OUTPUTS = 100_000  # what one extractor may yield for one page; past it the rest is an error
MAX_ERRORS = 20  # errors kept per page (the count goes on)


@dataclass(frozen=True, slots=True)
class BoundExtractor:
    """An extractor with its name and matching rules compiled."""

    name: str
    plugin: Any
    url_pattern: re.Pattern[str] | None
    content_types: tuple[str, ...]

    def matches(self, url: str, content_type: str) -> bool:
        if content_type not in self.content_types:
            return False
        return self.url_pattern is None or self.url_pattern.search(url) is not None


@dataclass(slots=True)
class PageRun:
    """What the plugins made of one page."""

    items: bytes = b""  # JSON lines (``records.item_line``), one per item, in yield order
    count: int = 0
    # (absolute URL, priority, link meta as JSON text: fetchers/linkmeta.py), not normalized
    links: list[tuple[str, int, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    dropped: int = 0  # items a pipeline dropped on purpose

    def error(self, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(" ".join(text.split())[:500])


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


@dataclass(frozen=True, slots=True)
class PluginSet:
    """The crawl's plugins in order (see the module docstring). ``specs``: how other processes load them."""

    extractors: tuple[BoundExtractor, ...]
    filters: tuple[tuple[str, Any], ...]
    pipelines: tuple[tuple[str, Any], ...]
    specs: tuple[str, ...] = ()
    item_max_bytes: int = 1024 * 1024

    def wants(self, url: str, status: int, content_type: str, body: bytes) -> bool:
        """True when some extractor runs on this response (2xx, a body, its URL and type match)."""
        if not body or not 200 <= status < 300 or not self.extractors:
            return False
        media = media_type(content_type)
        return any(e.matches(url, media) for e in self.extractors)

    def run(self, page: Page) -> PageRun:
        """Every matching extractor over ``page``, its items through the pipelines, as JSON lines."""
        out = PageRun()
        media = media_type(page.content_type)
        source = Source(page.url, page.final_url, page.fetched_at, page.digest)
        lines: list[bytes] = []
        for ext in self.extractors:
            if not ext.matches(page.url, media):
                continue
            try:
                produced = list(itertools.islice(ext.plugin.extract(page) or (), MAX_OUTPUTS + 1))
            except Exception as exc:
                out.error(f"plugin_failed: {ext.name} raised {_short(exc)}")
                continue
            if len(produced) > MAX_OUTPUTS:
                out.error(f"plugin_failed: {ext.name} yielded more than {MAX_OUTPUTS} things for one page")
                continue
            for thing in produced:
                if isinstance(thing, Link):
                    self._link(thing, page, out, ext.name)
                    continue
                item = self._item(thing, ext.name, out)
                if item is not None:
                    item = self._pipelines(item, page, out)
                if item is None:
                    continue
                try:
                    lines.append(item_line(item, ext.name, source, max_bytes=self.item_max_bytes))
                except ItemError as exc:
                    out.error(f"item_error: {ext.name}: {exc}")
        out.items, out.count = b"".join(lines), len(lines)
        return out

    @staticmethod
    def _item(thing: Any, name: str, out: PageRun) -> Item | None:
        if isinstance(thing, Item):
            return thing
        if isinstance(thing, Mapping):
            return Item(name, thing)
        out.error(f"item_error: {name}: yielded a {type(thing).__name__}, expected an Item, a Link or a dict")
        return None

    def _pipelines(self, item: Item, page: Page, out: PageRun) -> Item | None:
        for name, pipe in self.pipelines:
            try:
                got = pipe.process_item(item, page)
            except DropItem:
                out.dropped += 1
                return None
            except Exception as exc:
                out.error(f"item_error: pipeline {name} raised {_short(exc)}")
                return None
            if got is None:
                out.dropped += 1
                return None
            if not isinstance(got, Item):
                out.error(f"item_error: pipeline {name} returned a {type(got).__name__}, expected an Item or None")
                return None
            item = got
        return item

    @staticmethod
    def _link(link: Link, page: Page, out: PageRun, name: str) -> None:
        priority = link.priority
        if not isinstance(link.url, str) or type(priority) is not int:
            out.error(f"item_error: {name}: a Link needs a string url and an integer priority")
            return
        try:
            meta = linkmeta.encode(link.meta)
        except linkmeta.LinkMetaError as exc:
            out.error(f"item_error: {name}: a Link to {str(link.url)[:200]!r}: {exc}")
            return
        url = join(page.final_url or page.url, link.url)
        if url:  # '': an unparsable href, dropped like the page's own
            out.links.append((url, max(0, min(priority, 1 << 20)), meta))

    def filter_urls(self, urls: Iterable[str], source: str, errors: PageRun | None = None) -> list[tuple[str, str]]:
        """``(original, kept)`` for each URL the filters keep, ``kept`` normalized (a rewrite may change it)."""
        out: list[tuple[str, str]] = []
        for url in urls:
            kept: str | None = url
            for name, flt in self.filters:
                try:
                    got = flt.filter_url(kept, source)
                except Exception as exc:
                    if errors is not None:
                        errors.error(f"plugin_failed: filter {name} raised {_short(exc)}")
                    continue
                if got is None:
                    kept = None
                    break
                if got != kept:
                    kept = normalize(got) if isinstance(got, str) else None
                    if kept is None:
                        break
            if kept is not None:
                out.append((url, kept))
        return out


def portable(objects: Iterable[Any]) -> bool:
    """True when every object can be pickled to another process and its class imported there (not a class
    of ``__main__`` or one defined inside a function)."""
    for obj in objects:
        if type(obj).__module__ == "__main__":
            return False
        try:
            pickle.dumps(obj)
        except Exception:  # noqa: BLE001 - whatever stops pickling (a local class, a lock, a socket...)
            return False
    return True
