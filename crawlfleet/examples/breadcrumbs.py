"""Breadcrumbs: data handed from a page to the pages it links to, with ``Link.meta`` (what Scrapy's
``Request.meta`` does). Run it with::

    crawlfleet crawl https://example.org/ --plugin crawlfleet.examples.breadcrumbs:Breadcrumbs

Every HTML page gives one item of type "crumb": ``url``, ``from`` (the page whose link added this one to the
crawl; "" for a page found otherwise: a seed, a sitemap) and ``hops`` (the length of that trail of links).
Each page yields its links again as ``Link(href, meta={"from": page.url, "hops": n + 1})``; the crawl keeps
the meta of the link that first added a URL, and the page fetched from it reads it as ``page.meta``.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urljoin

from crawlfleet import Item, Link, Page


class Breadcrumbs:
    """Extractor: a crumb per page, and the page's links with the trail so far."""

    name = "breadcrumbs"

    def extract(self, page: Page) -> Iterator[Item | Link]:
        came = page.meta  # {} when no plugin link found this page
        hops = int(came.get("hops", 0))
        yield Item("crumb", {"url": page.url, "from": str(came.get("from", "")), "hops": hops})
        base = _base(page)
        for anchor in page.tree.css("a[href]"):
            url = _join(base, anchor.attributes.get("href") or "")
            if url:
                yield Link(url, meta={"from": page.url, "hops": hops + 1})


def _base(page: Page) -> str:
    """What the page's relative links resolve against: its ``<base href>``, else its URL (a relative
    ``Link`` is resolved against the page's URL only, so a page with a base must be resolved here)."""
    tag = page.tree.css_first("base[href]")
    return (_join(page.final_url, tag.attributes.get("href") or "") if tag is not None else "") or page.final_url


def _join(base: str, href: str) -> str:
    try:
        return urljoin(base, href)
    except ValueError:  # a hostile href urljoin refuses (a broken IPv6 host): that link alone is skipped
        return ""
