"""Read what a crawl has made durable: its journal segments (at the fault) and its store (at the end)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.harness.faults.accounting import Key, journaled_keys
from pipeline.settings import StoreSettings


def journal_records(segments: Path, *, pattern: str = "segment-*.jsonl") -> Iterator[dict[str, Any]]:
    """Every complete line of every segment, parsed (torn or unparsable lines are skipped, as replay does)."""
    for path in sorted(segments.glob(pattern)):
        with open(path, "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    yield obj


def crawl_records(out_dir: Path) -> Iterator[dict[str, Any]]:
    """Every result a fleet crawl in ``out_dir`` made durable: the dispatcher's journal, then the closed
    segments its fetch nodes wrote (processed ones under .done/ included;
    a ``.part`` file, torn by a kill, is not a record)."""
    yield from journal_records(out_dir / "segments")
    yield from journal_records(out_dir / "node-segments", pattern="**/*.jsonl")


def crawl_keys(out_dir: Path, *, before: float | None = None) -> set[Key]:
    """Keys of the results a fleet crawl had made durable by ``before`` (all of them if None).

    The dispatcher's journal counts a result the fetcher finished before then (see ``journal_keys``).
    A node's segment counts from its mtime on: the node renames it into place after its outcomes are
    settled in the store, so until then its results were in flight on that node."""
    keys = journal_keys(out_dir / "segments", before=before)
    root = out_dir / "node-segments"
    for path in sorted(root.glob("**/*.jsonl")) if root.is_dir() else []:
        if before is None or path.stat().st_mtime < before:
            keys |= journaled_keys(journal_records(path.parent, pattern=path.name))
    return keys


def journal_keys(segments: Path, *, before: float | None = None) -> set[Key]:
    """Access-log keys of every URL covered by a journaled result in ``segments``.

    ``before``: only results the fetcher finished before that time (``fetched_at``, wall clock). Read
    after the crawl, that is what had reached the crawl by a fault at ``before`` or was on its way to
    it (a result a killed worker had published, still in the broker): fetching such a URL again is a
    duplicate, whereas a result never produced or never delivered was in flight.
    """
    records = journal_records(segments)
    if before is not None:
        records = (r for r in records if float(r.get("fetched_at") or 0.0) < before)
    return journaled_keys(records)


def stored_urls(out_dir: Path, store: StoreSettings | None = None) -> set[str]:
    """URL and final URL of every page the crawl's store holds (SQLite in ``out_dir``, or HBase)."""
    s = store or StoreSettings()
    if s.kind == "hbase":
        from pipeline.storage.hbase import HBaseStore

        st: Any = HBaseStore(s.hbase_host, s.hbase_port, prefix=s.hbase_prefix, batch_size=s.hbase_batch_size)
    else:
        from pipeline.storage.sqlite import SqliteStore

        st = SqliteStore(out_dir / "crawl.db")
    try:
        out: set[str] = set()
        for page in st.iter_pages():
            out.add(page.url)
            if page.final_url:
                out.add(page.final_url)
        return out
    finally:
        st.close()


def stored_page_counts(out_dir: Path) -> dict[str, int]:
    """How many times each URL is stored as a page (SQLite): a value above 1 is a stored duplicate."""
    from pipeline.storage.sqlite import SqliteStore

    st = SqliteStore(out_dir / "crawl.db")
    try:
        counts: dict[str, int] = {}
        for page in st.iter_pages():
            counts[page.url] = counts.get(page.url, 0) + 1
        return counts
    finally:
        st.close()
