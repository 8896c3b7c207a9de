"""Products from schema.org markup: JSON-LD (``<script type="application/ld+json">``, ``@graph`` and lists
included) and microdata (``itemscope itemtype=".../Product"``). Run it with::

    crawlfleet crawl https://shop.example/ --plugin crawlfleet.examples.products:Products

Each product is one item of type "product": ``sku``, ``name``, ``price`` (a decimal string) and
``currency``. A page that describes the same product twice (JSON-LD and microdata, as many shops do) gives
it once: the first description by sku (or by name when there is no sku) wins. A product without a name is
dropped by ``process_item``, the example's item pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from crawlfleet import Item, Page

_PRODUCT = "product"


class Products:
    """Extractor and item pipeline of schema.org products."""

    name = "products"
    content_types = ("text/html", "application/xhtml+xml")

    def extract(self, page: Page) -> Iterator[Item]:
        seen: set[str] = set()
        for product in [*self._jsonld(page), *self._microdata(page)]:
            key = product.get("sku") or product.get("name") or ""
            if key in seen:
                continue
            seen.add(key)
            yield Item(_PRODUCT, product)

    def process_item(self, item: Item, page: Page) -> Item | None:
        if item.type == _PRODUCT and not item.data.get("name"):
            return None  # a product without a name is no use downstream
        return item

    # --- JSON-LD -------------------------------------------------------------------------------------
    def _jsonld(self, page: Page) -> Iterator[dict[str, Any]]:
        for node in page.tree.css('script[type="application/ld+json"]'):
            try:
                data = json.loads(node.text(deep=True) or "")
            except ValueError:
                continue  # a broken block costs that block only
            yield from (_product(x) for x in _things(data) if _is_product(x.get("@type")))

    # --- microdata ------------------------------------------------------------------------------------
    def _microdata(self, page: Page) -> Iterator[dict[str, Any]]:
        for node in page.tree.css("[itemscope][itemtype]"):
            if not (node.attributes.get("itemtype") or "").rstrip("/").endswith("schema.org/Product"):
                continue
            props: dict[str, Any] = {}
            for prop in node.css("[itemprop]"):
                key = prop.attributes.get("itemprop") or ""
                value = prop.attributes.get("content")
                if value is None:
                    value = prop.text(deep=True, strip=True)
                props.setdefault(key, value)
            yield _clean({"sku": props.get("sku"), "name": props.get("name"), "price": props.get("price"),
                          "currency": props.get("priceCurrency")})  # fmt: skip


def _things(data: Any) -> Iterator[dict[str, Any]]:
    """Every JSON-LD object of a block: the block, its list items and its ``@graph``."""
    if isinstance(data, list):
        for x in data:
            yield from _things(x)
    elif isinstance(data, dict):
        yield data
        yield from _things(data.get("@graph", []))


def _is_product(kind: Any) -> bool:
    return kind == "Product" or (isinstance(kind, list) and "Product" in kind)


def _product(obj: dict[str, Any]) -> dict[str, Any]:
    offers = obj.get("offers") or {}
    if isinstance(offers, list):
        offers = offers[0] if offers and isinstance(offers[0], dict) else {}
    return _clean({"sku": obj.get("sku"), "name": obj.get("name"), "price": offers.get("price"),
                   "currency": offers.get("priceCurrency")})  # fmt: skip


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v).strip() for k, v in fields.items() if v is not None and str(v).strip()}
