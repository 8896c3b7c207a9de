"""One item set per page version on the fleet, on the real HBase: the example products plugin runs in the
real link rounds (mrjob's inline runner: extract job, then crawl-db update job) over segments of fetch
results that the test records in the crawl db as a fetch node does, re-crawling on. A re-crawl of an
unchanged page (same bytes, or a 304) leaves its one item set; a page whose content changed gets a
second one; a round run again over the same segments (after a kill) writes none twice, whether its first
run wrote an item file or not."""

from __future__ import annotations

import collections
import dataclasses
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from fetchers.records import FetchResult
from jobs.itemargs import ItemArgs
from jobs.runner import JobArgs, LinkPipeline
from jobs.runnerconfig import RunnerConfig
from pipeline.crawl.outcome import outcome_of
from pipeline.frontier.schedule import RECRAWL_META
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import UrlRecord
from pipeline.storage.hbase import HBaseStore
from pipeline.storage.itemfiles import read_items
from pipeline.urls import fingerprint, host_of

pytestmark = pytest.mark.integration

PLUGIN = "crawlfleet.examples.products:Products"
SAME, CHANGES, NOT_MODIFIED = (f"http://shop.test/p/{n}" for n in ("same", "changes", "not-modified"))


def _page(sku: str, price: str) -> bytes:
    ld = {"@type": "Product", "sku": sku, "name": f"Product {sku}", "offers": {"price": price, "priceCurrency": "EUR"}}
    return f'<html><script type="application/ld+json">{json.dumps(ld)}</script><a href="/">home</a></html>'.encode()


def _fetch(url: str, at: float, body: bytes | None, *, status: int = 200) -> FetchResult:
    body = body or b""
    headers = {"etag": f'"{len(body)}"'} if body else {}
    return FetchResult(url, fingerprint(url), 1, final_url=url, status=status, content_type="text/html",
                       headers=headers, body=body, body_bytes=len(body), fetched_at=at)  # fmt: skip


class Fleet:
    """The crawl db, the segments and the link rounds of one test."""

    def __init__(self, store: HBaseStore, spec: str, tmp: Path) -> None:
        self.store, self.tmp = store, tmp
        items = ItemArgs(plugins=(PLUGIN,), root=str(tmp / "items"))
        self.links = LinkPipeline(RunnerConfig(runner="inline", work_dir=tmp / "work"),
                                  JobArgs(store=spec, max_depth=3, items=items), carry_cache=False)  # fmt: skip

    def segment(self, n: int, results: list[FetchResult]) -> Path:
        """The node's side: the segment written, the outcomes recorded (applied while the URL is PENDING)."""
        seg = self.tmp / "segments" / "n1" / f"default-{n:09d}-0-0000.jsonl"
        seg.parent.mkdir(parents=True, exist_ok=True)
        seg.write_text("".join(json.dumps(r.to_json()) + "\n" for r in results))
        self.store.record_results([outcome_of(r, keep_body=True) for r in results])
        self.store.flush()
        return seg

    def round(self, seg: Path) -> dict[str, int]:
        return self.links.process(seg).counters.get("items", {})

    def due_again(self, at: float) -> int:
        """The dispatcher's side: every URL due by ``at`` becomes PENDING again."""
        return sum(self.store.requeue_due(at, 100).values())

    def items(self) -> dict[str, list[tuple[str, str]]]:
        got: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
        for i in read_items(str(self.tmp / "items")):
            got[i["url"]].append((i["digest"], i["item"]["price"]))
        return dict(got)


@pytest.fixture
def fleet(hbase_thrift: tuple[str, int], hbase_prefix: str, tmp_path: Path) -> Any:
    prefix = f"{hbase_prefix}iv{uuid.uuid4().hex[:4]}"
    store = HBaseStore(hbase_thrift[0], hbase_thrift[1], prefix=prefix)
    cfg = RecrawlSettings(enabled=True, initial_interval_s=60.0, min_interval_s=5.0, max_interval_s=600.0)
    store.put_meta(RECRAWL_META, json.dumps(dataclasses.asdict(cfg)))
    store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 1) for u in (SAME, CHANGES, NOT_MODIFIED)])
    store.flush()
    try:
        yield Fleet(store, f"hbase://{hbase_thrift[0]}:{hbase_thrift[1]}/{prefix}", tmp_path)
    finally:
        store.drop()
        store.close()


def test_an_unchanged_recrawl_keeps_one_item_set_and_a_changed_page_gets_a_second(fleet: Fleet) -> None:
    first = fleet.round(fleet.segment(1, [_fetch(SAME, 100.0, _page("s", "1.00")),
                                          _fetch(CHANGES, 100.0, _page("c", "2.00")),
                                          _fetch(NOT_MODIFIED, 100.0, _page("n", "3.00"))]))  # fmt: skip
    assert first["items"] == 3
    assert fleet.due_again(1e9) == 3  # the re-crawl: every page due, PENDING again
    again = fleet.segment(2, [_fetch(SAME, 200.0, _page("s", "1.00")),  # the same bytes
                              _fetch(CHANGES, 200.0, _page("c", "2.50")),  # a new price: a new version
                              _fetch(NOT_MODIFIED, 200.0, None, status=304)])  # fmt: skip
    second = fleet.round(again)
    assert second["items"] == 1 and second["same_version"] == 1, second
    got = fleet.items()
    assert [p for _, p in got[SAME]] == ["1.00"] and [p for _, p in got[NOT_MODIFIED]] == ["3.00"]
    assert [p for _, p in got[CHANGES]] == ["2.00", "2.50"] and len({d for d, _ in got[CHANGES]}) == 2
    # The round run again after a kill (same segment, its update done): the file stands, nothing twice.
    assert fleet.round(again)["exists"] == 1
    assert fleet.items() == got
    # A round whose pages were all unchanged wrote no file: run again, its re-fetch is decided already.
    assert fleet.due_again(1e9) == 3
    quiet = fleet.segment(3, [_fetch(SAME, 300.0, _page("s", "1.00"))])
    assert fleet.round(quiet)["same_version"] == 1
    assert fleet.round(quiet)["decided"] == 1
    assert fleet.items() == got
