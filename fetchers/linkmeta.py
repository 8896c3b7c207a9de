"""Link meta: what an extraction plugin's ``Link(url, meta={...})`` tells the page that link leads to.

The meta travels with the URL from its discovery to its fetch, as Scrapy's ``Request.meta`` reaches the
response: compact JSON text on the URL's crawl-db row (written when the URL is first added: the first
discovery wins), on its task, and on its fetch result, where the page's extractors read it back as
``Page.meta``. Text, not a mapping, so that every hop carries it as it is; "" = none. At most
``LINK_META_MAX_BYTES`` of UTF-8: a plugin's bigger meta costs that link a per-item error
(``pipeline.plugins.chain``), and a bigger or malformed one off the wire is a schema error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

LINK_META_MAX_BYTES = 4096


class LinkMetaError(ValueError):
    """A plugin's meta that cannot travel: not a JSON object of string keys, or over the bound."""


def encode(meta: Any) -> str:
    """``meta`` as the JSON text that travels; "" for an empty mapping. LinkMetaError says what is wrong."""
    if not isinstance(meta, Mapping):
        raise LinkMetaError(f"link meta must be a mapping, got {type(meta).__name__}")
    if not meta:
        return ""
    if not all(isinstance(k, str) for k in meta):
        raise LinkMetaError("link meta keys must be strings")
    try:
        text = json.dumps(dict(meta), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise LinkMetaError(f"link meta is not JSON-serialisable ({' '.join(str(exc).split())[:200]})") from None
    if size > LINK_META_MAX_BYTES:
        raise LinkMetaError(f"link meta of {size} bytes is over {LINK_META_MAX_BYTES}")
    return text


def valid(value: Any) -> bool:
    """True for link meta as it may arrive in a message: "" or a JSON object's text within the bound."""
    if type(value) is not str:
        return False
    if not value:
        return True
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return len(raw) <= LINK_META_MAX_BYTES and value.startswith("{") and value.endswith("}")


def decode(text: str) -> dict[str, Any]:
    """The mapping ``text`` holds; {} for "" (and for text that is not a JSON object)."""
    if not text:
        return {}
    try:
        obj = json.loads(text)
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}
