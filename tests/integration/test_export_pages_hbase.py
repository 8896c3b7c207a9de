"""Pages without WARC on the real HBase (Thrift at 127.0.0.1:9090, a table prefix of this test's own):
``iter_pages`` and ``crawlfleet export pages`` read the store a fleet writes, as they read SQLite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crawlfleet import iter_pages
from pipeline.storage.base import Outcome, PageRecord, UrlRecord, UrlState
from pipeline.storage.hbase import HBaseStore
from pipeline.urls import fingerprint
from tests.fixtures.hbase import HOST, PORT

pytestmark = pytest.mark.integration

PAGES = {
    "http://a.test/": (b"<html><title>A</title><body><p>Hello <b>there</b></p><script>x()</script>"
                       b"<a href='/b'>b</a><a href='http://c.test/x#f'>c</a><a href='/b'>again</a></body></html>",
                       "text/html; charset=utf-8"),
    "http://a.test/data.json": (b'{"k": 1}', "application/json"),
    "http://a.test/file.bin": (b"\x00\x01binary", "application/octet-stream"),
}


def _fill(store: HBaseStore) -> None:
    store.add_urls([UrlRecord(u, fingerprint(u), "a.test", 0) for u in PAGES])
    store.record_results([
        Outcome(u, fingerprint(u), UrlState.DONE, 200, 1700000000.0 + i,
                page=PageRecord(u, fingerprint(u), u, 200, ct, body, 1700000000.0 + i, headers={"X-Test": str(i)}))
        for i, (u, (body, ct)) in enumerate(PAGES.items())
    ])  # fmt: skip
    store.flush()


def test_pages_read_back_from_hbase_with_text_and_links(hbase_prefix: str, tmp_path: Path) -> None:
    prefix = f"{hbase_prefix}ex"
    store = HBaseStore(HOST, PORT, prefix=prefix)
    try:
        _fill(store)
    finally:
        store.close()
    spec = f"hbase://{HOST}:{PORT}/{prefix}"
    pages = {p["url"]: p for p in iter_pages(spec)}
    assert set(pages) == set(PAGES)
    home = pages["http://a.test/"]
    assert "Hello there" in home["text"] and "x()" not in home["text"]
    assert home["links"] == ["http://a.test/b", "http://c.test/x"]
    assert home["headers"] == {"X-Test": "0"} and home["status"] == 200 and home["digest"].startswith("sha1:")
    assert pages["http://a.test/data.json"]["text"] == '{"k": 1}' and pages["http://a.test/data.json"]["links"] == []
    assert pages["http://a.test/file.bin"]["text"] == ""
    for fmt in ("jsonl", "parquet"):
        proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "export", "pages", "--store", spec,
                               "--format", fmt, "--out", str(tmp_path / fmt)], capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["pages"] == 3
    import pyarrow.parquet as pq

    table = pq.read_table(next((tmp_path / "parquet").glob("*.parquet")))
    row = {r["url"]: r for r in table.to_pylist()}["http://a.test/"]
    assert row["links"] == home["links"] and dict(row["headers"]) == {"X-Test": "0"}
