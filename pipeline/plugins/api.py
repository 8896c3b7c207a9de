"""The plugin API: what a plugin sees of a page, what it yields, and the three kinds of plugin.

A plugin is any object with one or more of these methods (one object may play several parts):

* ``extract(page) -> Iterable[Item | Link | dict]`` (``Extractor``): items and extra links of a page.
  Optional attributes: ``name`` (default: the class name), ``url_pattern`` (a regular expression searched in
  the URL; None = every URL) and ``content_types`` (default: HTML). An extractor runs only on pages that
  were fetched (2xx) with a body.
* ``filter_url(url, source) -> str | None`` (``UrlFilter``): every link of a page, extracted or yielded,
  before it joins the crawl: return it (accept), another URL (rewrite: Nutch's URL normalizers) or None
  (reject: Nutch's URL filters).
* ``process_item(item, page) -> Item | None`` (``ItemPipeline``): every item, in plugin order (Scrapy's item
  pipelines): return it, a changed copy, or None (drop); raise ``DropItem`` to drop it with a reason.

A plugin runs in whatever process parses the page: a parse process of the embedded crawl, the crawl's own
process, or a task of the fleet's extract job on any mrjob runner. It must not rely on state shared between
pages of a crawl; what it yields is all that reaches the crawl.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from fetchers import linkmeta

HTML_TYPES: tuple[str, ...] = ("text/html", "application/xhtml+xml")


class DropItem(Exception):  # noqa: N818 - Scrapy's name, which crawl engineers know
    """Raised by an item pipeline to drop an item on purpose (counted, not an error)."""


@dataclass(frozen=True, slots=True)
class Item:
    """One piece of data a page gave: its ``type`` (e.g. "product") and its fields (JSON-serialisable).
    An extractor may yield a plain dict instead: its type is then the extractor's name."""

    type: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Link:
    """An extra link an extractor found (a URL in JSON, a pagination parameter...). ``url`` may be relative
    to the page. ``priority`` >= 0 is added to the URL's in-link count, which orders a host's pending URLs
    (``dispatch.priority = "inlinks"``). ``meta`` (a JSON-serialisable mapping of at most
    ``fetchers.linkmeta.LINK_META_MAX_BYTES`` = 4096 bytes as JSON) travels with the URL to its fetch: the
    page it leads to reads it as ``Page.meta``, as Scrapy's ``Request.meta`` reaches the response. It is
    kept with the URL when the link adds it to the crawl: a URL known already (found before as a plain link or
    by another page's link) keeps the meta it has, if any. Bigger or non-JSON meta costs that link an
    ``item_error`` (the page's other links and items stay)."""

    url: str
    priority: int = 0
    meta: Mapping[str, Any] = field(default_factory=dict)


class Page:
    """One fetched page version, as an extractor sees it. ``text`` (the decoded body) and ``tree`` (a
    selectolax ``LexborHTMLParser``, shared with the crawl's link extraction) are built on first use;
    ``meta`` is the meta of the plugin ``Link`` that found the page ({} for a page found otherwise)."""

    __slots__ = ("_link_meta", "_make_tree", "_make_text", "_meta", "_text", "_tree", "body", "content_type",
                 "depth", "digest", "fetched_at", "final_url", "headers", "status", "url")  # fmt: skip

    def __init__(
        self,
        *,
        url: str,
        final_url: str,
        status: int,
        headers: Mapping[str, str],
        content_type: str,
        body: bytes,
        digest: str,
        fetched_at: float = 0.0,
        depth: int = 0,
        make_text: Callable[[], str] | None = None,
        make_tree: Callable[[], Any] | None = None,
        link_meta: str = "",
    ) -> None:
        self.url, self.final_url, self.status = url, final_url or url, status
        self.headers, self.content_type, self.body = headers, content_type, body
        self.digest, self.fetched_at, self.depth = digest, fetched_at, depth
        self._make_text, self._make_tree = make_text, make_tree
        self._text: str | None = None
        self._tree: Any = None
        self._link_meta = link_meta  # the JSON text as it travelled (fetchers/linkmeta.py), decoded on first use
        self._meta: dict[str, Any] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        """The meta of the plugin ``Link`` this page was found by (``Link.meta``); {} when none."""
        if self._meta is None:
            self._meta = linkmeta.decode(self._link_meta)
        return self._meta

    @property
    def text(self) -> str:
        """The body decoded by the charset rules the crawl parses with (HTTP, UTF-8, ``<meta>``, cp1252)."""
        if self._text is None:
            self._text = self._make_text() if self._make_text else self.body.decode("utf-8", "replace")
        return self._text

    @property
    def tree(self) -> Any:
        """The parsed HTML (``selectolax.lexbor.LexborHTMLParser``): ``page.tree.css("script[type=...]")``."""
        if self._tree is None:
            if self._make_tree is None:
                from selectolax.lexbor import LexborHTMLParser

                self._tree = LexborHTMLParser(self.text)
            else:
                self._tree = self._make_tree()
        return self._tree

    def __repr__(self) -> str:
        return f"Page({self.url!r}, status={self.status}, {len(self.body)} bytes)"


@runtime_checkable
class Extractor(Protocol):
    def extract(self, page: Page) -> Iterable[Item | Link | Mapping[str, Any]]: ...


@runtime_checkable
class UrlFilter(Protocol):
    def filter_url(self, url: str, source: str) -> str | None: ...


@runtime_checkable
class ItemPipeline(Protocol):
    def process_item(self, item: Item, page: Page) -> Item | None: ...
