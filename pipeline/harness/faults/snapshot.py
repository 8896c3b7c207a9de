"""Read what a crawl's store holds at the end of a trial (the judge's only look inside the crawl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.settings import StoreSettings


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
