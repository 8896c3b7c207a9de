"""The extract job's item files (jobs/plugged.py), on a real SQLite crawl db: one item set per recorded
fetch, one file per segment, never written twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crawlfleet import Item, Link, Page
from fetchers.records import FetchResult
from jobs import logic, plugged
from pipeline.plugins.loading import build
from pipeline.storage.base import Outcome, PageRecord, UrlRecord, UrlState
from pipeline.storage.itemfiles import read_items
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint

URL = "http://site.test/p/1"
BODY = b"<html><title>A</title><a href='/next'>n</a></html>"


class Titles:
    def extract(self, page: Page) -> Any:
        yield Item("title", {"t": page.tree.css_first("title").text()})


def _result(fetched_at: float) -> FetchResult:
    return FetchResult(URL, fingerprint(URL), 0, final_url=URL, status=200, content_type="text/html", body=BODY,
                       fetched_at=fetched_at)  # fmt: skip


def _store(tmp_path: Path, fetched_at: float) -> SqliteStore:
    store = SqliteStore(tmp_path / "crawl.db")
    store.add_urls([UrlRecord(URL, fingerprint(URL), "site.test", 0)])
    page = PageRecord(URL, fingerprint(URL), URL, 200, "text/html", BODY, fetched_at)
    store.record_results([Outcome(URL, fingerprint(URL), UrlState.DONE, 200, fetched_at, page=page)])
    return store


def test_only_the_fetch_the_crawl_db_recorded_gives_items_and_a_file_is_written_once(tmp_path: Path) -> None:
    plugins = build([("t", Titles())], item_max_bytes=1000)
    assert plugins is not None
    rules = logic.LinkRules.build(max_depth=5)
    store = _store(tmp_path, fetched_at=200.0)
    root = str(tmp_path / "items")
    counts = {}
    for name, fetched_at in (("n1/seg-a", 100.0), ("n2/seg-b", 200.0)):  # an adopted copy, the recorded fetch
        seg = plugged.SegmentItems()
        cands, run, _ = plugged.page_candidates(_result(fetched_at), rules, plugins)
        assert [c.url for c in cands] == ["http://site.test/next"]
        seg.add(_result(fetched_at), run)
        counts[name] = seg.write(root, name, fmt="jsonl", store=store)
    assert counts["n1/seg-a"]["unrecorded"] == 1 and counts["n2/seg-b"]["items"] == 1
    assert [(i["url"], i["fetched_at"], i["item"]) for i in read_items(root)] == [(URL, 200.0, {"t": "A"})]
    again = plugged.SegmentItems()  # the round run again after a kill: the file stands
    again.add(_result(200.0), plugged.page_candidates(_result(200.0), rules, plugins)[1])
    assert again.write(root, "n2/seg-b", fmt="jsonl", store=store)["exists"] == 1
    assert len(list(read_items(root))) == 1
    store.close()


def test_segment_names_are_node_and_file() -> None:
    assert plugged.segment_name("/x/node-segments/n1/default-000000001-17.jsonl") == "n1/default-000000001-17"
    assert plugged.segment_name("file:///x/n2/s.jsonl") == "n2/s"


class Next:
    def extract(self, page: Page) -> Any:
        yield Link("/soon", priority=5)


def test_a_plugin_links_priority_counts_as_in_links_in_the_merged_record() -> None:
    plugins = build([("n", Next())], item_max_bytes=1000)
    assert plugins is not None
    cands, run, boost = plugged.page_candidates(_result(1.0), logic.LinkRules.build(max_depth=5), plugins)
    assert run is not None and run.items == b"" and sorted(c.url for c in cands) == ["http://site.test/next",
                                                                                      "http://site.test/soon"]
    combiner = logic.LinkCombiner()
    for cand in cands:
        combiner.add(cand, 1 + boost.get(cand.url_id, 0))
    merged = {url: logic.merge_link_values(url, [part]) for url, part in combiner.drain()}
    assert merged["http://site.test/soon"]["inlinks"] == 6 and merged["http://site.test/next"]["inlinks"] == 1


class Fails:
    def extract(self, page: Page) -> Any:
        raise RuntimeError("layout changed")


def test_a_plugin_that_fails_on_a_page_is_listed_beside_the_segments_items(tmp_path: Path) -> None:
    plugins = build([("f", Fails()), ("t", Titles())], item_max_bytes=1000)
    assert plugins is not None
    seg = plugged.SegmentItems()
    seg.add(_result(3.0), plugged.page_candidates(_result(3.0), logic.LinkRules.build(max_depth=5), plugins)[1])
    counts = seg.write(str(tmp_path), "n1/s", fmt="both", store=None)
    assert counts["items"] == 1 and counts["errors"] == 1
    errors = [json.loads(line) for line in (tmp_path / "n1" / "s.errors.jsonl").read_text().splitlines()]
    assert errors == [{"url": URL, "fetched_at": 3.0, "digest": errors[0]["digest"],
                       "error": "plugin_failed: Fails raised RuntimeError: layout changed"}]
    assert (tmp_path / "n1" / "s.parquet").exists() and [i["type"] for i in read_items(str(tmp_path))] == ["title"]
