"""An item's JSON line: the item and where it came from. Pure.

Every line of an item file is one object::

    {"type": "product", "plugin": "products", "url": "https://shop.example/p/1",
     "final_url": "https://shop.example/p/1", "fetched_at": 1767225600.0,
     "digest": "sha1:…", "item": {"sku": "1-2", "name": "…", "price": 12.5}}

``url`` is the page's URL as the crawl fetched it (``final_url`` after redirects), ``fetched_at`` its fetch
time (epoch seconds), ``digest`` the body's SHA-1 in base32 (the WARC payload digest's form). A page
version is ``(url, digest)``; the crawl writes one item set per page version.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.plugins.api import Item


@dataclass(frozen=True, slots=True)
class Source:
    """The page version items came from."""

    url: str
    final_url: str
    fetched_at: float
    digest: str


class ItemError(ValueError):
    """An item that cannot be written (not JSON, too big, not a mapping): one per-item error line."""


def item_line(item: Item, plugin: str, source: Source, *, max_bytes: int) -> bytes:
    """The JSON line of ``item``; ItemError naming what is wrong with it."""
    if not isinstance(item.type, str) or not item.type:
        raise ItemError(f"item type must be a non-empty string, got {item.type!r:.80}")
    if not isinstance(item.data, Mapping):
        raise ItemError(f"item data must be a mapping, got {type(item.data).__name__}")
    if not all(isinstance(k, str) for k in item.data):
        raise ItemError("item field names must be strings")
    try:
        data = json.dumps(dict(item.data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ItemError(f"item is not JSON-serialisable ({exc})") from None
    if len(data) > max_bytes:  # characters, a lower bound of the bytes: the exact check follows
        raise ItemError(f"item of {len(data)} characters is over plugins.item_max_bytes ({max_bytes})")
    try:
        raw = data.encode("utf-8")
    except UnicodeEncodeError:
        raise ItemError("item text holds a lone surrogate (not UTF-8)") from None
    if len(raw) > max_bytes:
        raise ItemError(f"item of {len(raw)} bytes is over plugins.item_max_bytes ({max_bytes})")
    head = json.dumps(
        {"type": item.type, "plugin": plugin, "url": source.url, "final_url": source.final_url,
         "fetched_at": source.fetched_at if math.isfinite(source.fetched_at) else 0.0, "digest": source.digest},
        ensure_ascii=False, separators=(",", ":"),
    )  # fmt: skip
    return head[:-1].encode() + b',"item":' + raw + b"}\n"


def parse_line(line: bytes | str) -> dict[str, Any] | None:
    """One item line as a dict, or None for a torn or foreign line."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("item"), dict) or "digest" not in obj:
        return None
    return obj
