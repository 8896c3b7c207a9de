"""Product pages of the testbed (``Web(products=True)``, ``testbed serve --products``), and their truth.

Normal page m of host i sells products when ``(7 * i + m) % 3 == 0``; how it says so depends on ``m % 4``:

==========  =======================================================================================
m % 4       markup
==========  =======================================================================================
0           one product in JSON-LD (``<script type="application/ld+json">``, schema.org ``Product``)
1           one product in microdata (``itemscope itemtype="https://schema.org/Product"``)
2           the same product twice, in JSON-LD and in microdata: a correct extractor gives it once
3           a listing: a JSON-LD ``@graph`` of two products and a ``WebPage`` that is not one
==========  =======================================================================================

Each product has a ``sku`` (``{i}-{m}-{k}``), a ``name`` (some with non-ASCII letters), a ``price``
(a decimal string, two places) and a ``currency``. ``products_truth`` lists every product of the pages a
correct crawl fetches (``truth.compute_truth``'s ``pages``), so a test can judge an extractor's items
exactly: each product once, with its fields. Deterministic; nothing here renders links, so the link
graph and every other truth are the same with products on or off.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

from pipeline.harness.testbed.model import Rng, Web, host_index

_ADJECTIVES = ("Sturdy", "Crème", "Nimble", "Quiet", "Über", "Bright", "Señorial", "Compact")
_NOUNS = ("Crawler", "Frontier", "Resolver", "Queue", "Lease", "Sitemap", "Anchor", "Shard")
_CURRENCIES = ("EUR", "USD", "GBP")


@dataclass(frozen=True, slots=True)
class Product:
    sku: str
    name: str
    price: str
    currency: str

    def as_dict(self, url: str) -> dict[str, Any]:
        return {"sku": self.sku, "name": self.name, "price": self.price, "currency": self.currency, "url": url}


def sells(i: int, m: int) -> bool:
    return (7 * i + m) % 3 == 0


def products_on(web: Web, i: int, m: int) -> list[Product]:
    """The products normal page m of host i offers (none unless ``web.products`` and ``sells(i, m)``)."""
    if not web.products or not sells(i, m):
        return []
    rng = Rng((web.seed * 7_000_003 + i) * 1_000_033 + m)
    count = 2 if m % 4 == 3 else 1
    out = []
    for k in range(count):
        name = f"{_ADJECTIVES[rng.below(len(_ADJECTIVES))]} {_NOUNS[rng.below(len(_NOUNS))]} {i}-{m}-{k}"
        cents = rng.between(199, 99_999)
        out.append(Product(f"{i}-{m}-{k}", name, f"{cents // 100}.{cents % 100:02d}", _CURRENCIES[rng.below(3)]))
    return out


def _jsonld(p: Product) -> dict[str, Any]:
    return {"@type": "Product", "name": p.name, "sku": p.sku,
            "offers": {"@type": "Offer", "price": p.price, "priceCurrency": p.currency}}  # fmt: skip


def _script(obj: dict[str, Any]) -> str:
    text = json.dumps(obj, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/ld+json">{text}</script>'


def _microdata(p: Product) -> str:
    return (
        '<div itemscope itemtype="https://schema.org/Product">'
        f'<h2 itemprop="name">{html.escape(p.name)}</h2><meta itemprop="sku" content="{html.escape(p.sku)}">'
        '<div itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
        f'<span itemprop="price" content="{p.price}">{p.price}</span> '
        f'<meta itemprop="priceCurrency" content="{p.currency}"></div></div>\n'
    )


def markup(web: Web, i: int, m: int) -> tuple[str, str]:
    """``(head, body)`` HTML of page m's products ("" and "" when it has none)."""
    products = products_on(web, i, m)
    if not products:
        return "", ""
    kind = m % 4
    context = {"@context": "https://schema.org"}
    if kind == 3:
        graph = [{"@type": "WebPage", "name": f"listing {i}-{m}"}, *(_jsonld(p) for p in products)]
        return _script({**context, "@graph": graph}), ""
    head = _script({**context, **_jsonld(products[0])}) if kind in (0, 2) else ""
    body = _microdata(products[0]) if kind in (1, 2) else ""
    return head, body


def products_truth(web: Web, pages: list[str]) -> list[dict[str, Any]]:
    """Every product on the ``pages`` (URLs: a truth's ``pages``), sorted by sku, with the page's URL."""
    out = []
    prefix = "http://"
    for url in pages:
        if not url.startswith(prefix):
            continue
        authority, _, rest = url[len(prefix):].partition("/")
        i = host_index(authority.rsplit(":", 1)[0], web.hosts)
        m = web.page_number("/" + rest)
        if i >= 0 and m >= 0:
            out += [p.as_dict(url) for p in products_on(web, i, m)]
    return sorted(out, key=lambda d: d["sku"])
