"""The plugins' items of a crawl, read back: ``iter_items(crawl directory | item root URI)``.

The embedded crawl writes them under OUT/items (``pipeline.storage.itemlog``: JSONL, Parquet once
converted), the fleet's extract job under its item root, one file per segment (``jobs.plugged``). Both
read alike: every item line's dict (``pipeline.plugins.records``), files in name order.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.storage.itemfiles import read_items


def items_root(where: str | Path) -> str:
    """The item root of a crawl directory (its items/), or ``where`` itself (a root path or URI)."""
    text = str(where)
    if "://" not in text and (Path(text) / "items").is_dir():
        return str(Path(text) / "items")
    return text


def iter_items(where: str | Path, *, type: str | None = None) -> Iterator[dict[str, Any]]:  # noqa: A002
    """Every item of a crawl (see the module docstring); ``type``: only items of that type."""
    for obj in read_items(items_root(where)):
        if type is None or obj.get("type") == type:
            yield obj
