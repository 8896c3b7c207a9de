"""The Python API (the ``crawlfleet`` package) against the testbed: ``Crawl(...).run`` and ``arun`` with a
plugin object and a callback per page, ``iter_items`` and ``iter_pages`` over the crawl directory, and
``crawlfleet export pages`` in both formats, all judged by the testbed's truth."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crawlfleet import Crawl, Item, Page, PageResult, iter_items, iter_pages
from crawlfleet.examples.products import Products
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.products import products_truth

pytestmark = pytest.mark.e2e

DEPTH = 12


def _settings(tb: TestbedProcess) -> dict[str, dict[str, Any]]:
    return {"dns": {"servers": (f"127.0.0.1:{tb.dns_port}",)}, "security": {"allow_networks": ("127.0.10.0/24",)},
            "scope": {"max_depth": DEPTH}, "politeness": {"min_host_delay_s": 0.02}}  # fmt: skip


class Headings:
    """A second plugin: the page's <h1>, as a plain dict (its type is the plugin's name)."""

    name = "headings"

    def extract(self, page: Page) -> Any:
        h1 = page.tree.css_first("h1")
        if h1 is not None:
            yield {"h1": h1.text(strip=True)}


def test_run_streams_pages_and_items_and_the_crawl_reads_back(tmp_path: Path) -> None:
    seen: list[PageResult] = []
    with TestbedProcess(6, 20, seed=51, workdir=tmp_path / "tb", products=True) as tb:
        out = tmp_path / "out"
        summary = Crawl(_settings(tb), tb.seeds, plugins=[Products(), Headings()], out=out).run(on_page=seen.append)
        truth = tb.truth(max_depth=DEPTH)
        want = products_truth(tb.web, truth["pages"])
    streamed = [i for p in seen for i in p.items if i["type"] == "product"]
    stored = [i for i in iter_items(out, type="product")]
    assert sorted(i["item"]["sku"] for i in streamed) == sorted(i["item"]["sku"] for i in stored) \
        == [w["sku"] for w in want]  # fmt: skip
    fetched = {p.url for p in seen if p.status == 200}
    assert set(truth["pages"]) <= fetched | {p.final_url for p in seen}
    assert summary["items"]["items"] == len(want) + len(list(iter_items(out, type="headings")))
    pages = {p["url"]: p for p in iter_pages(out)}
    home = pages[tb.seeds[0]]
    assert home["status"] == 200 and home["text"].startswith(home["text"].strip()) and home["links"]
    assert all(link.startswith("http://") for link in home["links"])
    assert (out / "crawl-settings.json").exists()  # `crawlfleet crawl --resume` and `export` work on it too
    with pytest.raises(ValueError, match="holds a crawl already"):
        Crawl(_settings(tb), tb.seeds, out=out)


def test_arun_in_an_event_loop_and_export_pages_in_both_formats(tmp_path: Path) -> None:
    got: list[str] = []

    class Titles:
        def extract(self, page: Page) -> Any:
            yield Item("title", {"t": page.tree.css_first("title").text()})

    with TestbedProcess(3, 8, seed=52, workdir=tmp_path / "tb") as tb:
        out = tmp_path / "out"

        async def main() -> dict[str, Any]:
            crawl = Crawl(_settings(tb), tb.seeds, plugins=[Titles()], out=out)
            return await crawl.arun(on_page=lambda p: got.extend(i["item"]["t"] for i in p.items))

        summary = asyncio.run(main())
        pages = tb.truth(max_depth=DEPTH)["pages"]
    assert summary["pages_fetched"] >= len(pages) and len(got) >= len(pages)
    for fmt in ("jsonl", "parquet"):
        proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "export", "pages", "--store", f"sqlite:{out}/crawl.db",
                               "--format", fmt, "--out", str(tmp_path / fmt)], capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["pages"] == len(list(iter_pages(out, text=False, links=False)))
    rows = [json.loads(line) for p in sorted((tmp_path / "jsonl").glob("*.jsonl")) for line in p.read_text().splitlines()]
    import pyarrow.parquet as pq

    table = pq.read_table(next((tmp_path / "parquet").glob("*.parquet")))
    assert sorted(r["url"] for r in rows) == sorted(table.column("url").to_pylist())
    assert set(rows[0]) == {"url", "final_url", "status", "content_type", "headers", "fetched_at", "digest", "text", "links"}
