"""A crawl's stored pages as plain records, without WARC: one dict per page.

``iter_pages(store)`` reads ``Store.iter_pages`` (SQLite or HBase) and gives, per stored page::

    {"url", "final_url", "status", "content_type", "headers", "fetched_at", "digest", "text", "links"}

``text`` is the page's visible text (HTML: scripts, styles and hidden parts left out, as the duplicate
detection reads it; other text types: the decoded body; anything else: ""), ``links`` the page's
outgoing links as the crawl extracts them (absolute, normalized, document order, each once). A page kept
without its body (``fetch.keep_body = false``) has empty ``text`` and ``links``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.links.change import content_digest, visible_text
from pipeline.links.extract import decoded_text, extract
from pipeline.storage.base import PageRecord, Store
from pipeline.storage.factory import DB_NAME, from_spec

FIELDS = ("url", "final_url", "status", "content_type", "headers", "fetched_at", "digest", "text", "links")


def page_record(page: PageRecord, *, text: bool = True, links: bool = True) -> dict[str, Any]:
    """One page as a plain dict (see the module docstring). Never raises on a hostile body."""
    media = page.content_type.split(";", 1)[0].strip().lower()
    html = "html" in media
    body = page.body
    out: dict[str, Any] = {
        "url": page.url, "final_url": page.final_url or page.url, "status": page.status,
        "content_type": page.content_type, "headers": dict(page.headers), "fetched_at": page.fetched_at,
        "digest": content_digest(body) if body else "",
    }  # fmt: skip
    if text:
        if not body:
            out["text"] = ""
        elif html:
            out["text"] = " ".join(visible_text(body, page.content_type).split())
        elif media.startswith("text/") or media.endswith(("json", "xml")):
            out["text"] = decoded_text(body, page.content_type)
        else:
            out["text"] = ""
    if links:
        found = extract(body, base_url=page.final_url or page.url, content_type=page.content_type, max_anchor=0) \
            if body and html else None  # fmt: skip
        out["links"] = list(dict.fromkeys(link.url for link in found.links)) if found is not None else []
    return out


def open_store(where: str | Path) -> Store:
    """A store from a spec (``sqlite:PATH``, ``hbase``, ``hbase://HOST:PORT/PREFIX``) or a crawl directory."""
    text = str(where)
    if text.startswith("sqlite:") or text == "hbase" or text.startswith("hbase://"):
        return from_spec(text)
    path = Path(text)
    db = path / DB_NAME if path.is_dir() else path
    if not db.is_file():
        raise FileNotFoundError(f"{where}: no crawl db (expected a crawl directory, sqlite:PATH or hbase://...)")
    return from_spec(f"sqlite:{db}")


def iter_pages(where: str | Path | Store, *, text: bool = True, links: bool = True) -> Iterator[dict[str, Any]]:
    """Every stored page of a crawl as a dict (see the module docstring). ``where``: a crawl directory, a
    store spec, or an open ``Store`` (left open). Pages come in the store's order."""
    if isinstance(where, Store):
        for page in where.iter_pages():
            yield page_record(page, text=text, links=links)
        return
    store = open_store(where)
    try:
        for page in store.iter_pages():
            yield page_record(page, text=text, links=links)
    finally:
        store.close()
