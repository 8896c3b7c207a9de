"""One page through the plugins (pipeline/plugins/chain.py, prepare.py): what reaches the crawl, and
that a plugin's failure costs that plugin's output on that page, or that one item, never more."""

from __future__ import annotations

import json
import math
from typing import Any

from fetchers.records import FetchResult
from pipeline.plugins.api import DropItem, Item, Link, Page
from pipeline.plugins.loading import build
from pipeline.plugins.prepare import complete, prepare_found
from pipeline.settings import Settings
from pipeline.urls import fingerprint

HTML = b"""<html><head><title>T</title></head><body>
<a href="/a">a</a> <a href="http://other.test/x">x</a> <a href="/drop/1">d</a></body></html>"""


def _result(url: str = "http://site.test/p/1", body: bytes = HTML, ct: str = "text/html; charset=utf-8") -> FetchResult:
    return FetchResult(url=url, url_id=fingerprint(url), depth=1, final_url=url, status=200,
                       content_type=ct, body=body, fetched_at=1700000000.5)  # fmt: skip


class Titles:
    name = "titles"

    def extract(self, page: Page) -> Any:
        yield Item("title", {"title": page.tree.css_first("title").text()})
        yield Link("/from-plugin", priority=5)
        yield {"plain": "dict"}


class Boom:
    def extract(self, page: Page) -> Any:
        yield Item("lost", {"x": 1})
        raise ValueError("bad page")


class Bad:
    name = "bad"

    def extract(self, page: Page) -> Any:
        yield Item("set", {"s": {1, 2}})
        yield Item("nan", {"n": math.nan})
        yield Item("big", {"b": "x" * 5000})
        yield Item("ok", {"fine": True})
        yield 42


class Gate:
    def filter_url(self, url: str, source: str) -> str | None:
        if "/drop/" in url:
            return None
        return url.replace("other.test/x", "OTHER.test/y#top")  # a rewrite, normalized by the crawl

    def process_item(self, item: Item, page: Page) -> Item | None:
        if item.type == "ok":
            raise DropItem("not wanted")
        if item.type == "title":
            return Item("title", {**item.data, "checked": True})
        return item


def _lines(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (raw or b"").splitlines()]


def test_items_links_priorities_and_filters_reach_the_prepared_result() -> None:
    plugins = build([("t", Titles()), ("g", Gate())], item_max_bytes=1000)
    assert plugins is not None
    prepared = prepare_found(_result(), Settings(), plugins)
    assert prepared.plugged is not None
    items = _lines(prepared.plugged.items)
    assert [(i["type"], i["item"]) for i in items] == [("title", {"title": "T", "checked": True}),
                                                       ("titles", {"plain": "dict"})]
    first = items[0]
    assert first["url"] == first["final_url"] == "http://site.test/p/1" and first["fetched_at"] == 1700000000.5
    assert first["digest"].startswith("sha1:") and first["plugin"] == "titles"
    found = [u for u, _ in prepared.found or []]
    assert found == ["http://site.test/a", "http://other.test/y", "http://site.test/from-plugin"]
    assert dict(prepared.found or [])["http://other.test/y"] == fingerprint("http://other.test/y")
    assert prepared.plugged.boost == {fingerprint("http://site.test/from-plugin"): 5}
    assert prepared.plugged.count == 2 and prepared.plugged.error_count == 0


def test_a_raising_extractor_costs_its_own_output_on_that_page_only() -> None:
    plugins = build([("boom", Boom()), ("t", Titles())], item_max_bytes=1000)
    assert plugins is not None
    prepared = prepare_found(_result(), Settings(), plugins)
    assert prepared.plugged is not None
    assert [i["type"] for i in _lines(prepared.plugged.items)] == ["title", "titles"]
    assert prepared.plugged.errors == ("plugin_failed: Boom raised ValueError: bad page",)
    assert len(prepared.found or []) == 4  # the page's links and the other plugin's link stand


def test_malformed_and_oversized_items_are_per_item_errors() -> None:
    plugins = build([("bad", Bad())], item_max_bytes=1000)
    assert plugins is not None
    prepared = prepare_found(_result(), Settings(), plugins)
    assert prepared.plugged is not None
    assert [i["type"] for i in _lines(prepared.plugged.items)] == ["ok"]
    errors = prepared.plugged.errors
    assert prepared.plugged.error_count == 4 and all(e.startswith("item_error: bad: ") for e in errors)
    assert "not JSON-serialisable" in errors[0] and "not JSON-serialisable" in errors[1]
    assert "over plugins.item_max_bytes (1000)" in errors[2] and "yielded a int" in errors[3]


def test_extractors_match_by_url_pattern_and_content_type() -> None:
    class Json:
        url_pattern = r"/api/"
        content_types = ("application/json",)

        def extract(self, page: Page) -> Any:
            yield {"n": json.loads(page.text)["n"]}

    plugins = build([("j", Json())], item_max_bytes=1000)
    assert plugins is not None
    api = _result("http://site.test/api/1", b'{"n": 3}', "application/json")
    assert plugins.wants(api.url, 200, api.content_type, api.body)
    assert not plugins.wants("http://site.test/p/1", 200, "application/json", b"{}")
    assert not plugins.wants(api.url, 404, api.content_type, api.body)
    prepared = prepare_found(api, Settings(), plugins)
    assert prepared.plugged is not None and prepared.found == []
    assert [i["item"] for i in _lines(prepared.plugged.items)] == [{"n": 3}]
    page = prepare_found(_result(), Settings(), plugins)  # HTML: links as ever, no items
    assert page.plugged is not None and page.plugged.items == b"" and len(page.found or []) == 3


def test_complete_prepares_what_no_process_did_and_leaves_a_quarantined_page_alone() -> None:
    plugins = build([("t", Titles())], item_max_bytes=1000)
    assert plugins is not None
    res = _result()
    complete(res, Settings(), plugins)
    assert res.prepared is not None and res.prepared.plugged is not None and res.prepared.found
    assert res.prepared.plugged.count == 2
    from fetchers.records import Prepared

    hostile = _result()
    hostile.prepared = Prepared(b"line\n", links=[], parse_error="parse_failed: ...")
    complete(hostile, Settings(), plugins)
    assert hostile.prepared.plugged is None
