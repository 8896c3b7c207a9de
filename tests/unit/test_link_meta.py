"""``Link.meta`` travels with the URL it leads to (fetchers/linkmeta.py), hop by hop: a plugin's link ->
the page's prepared output -> the crawl-db row (first discovery wins: SQLite and HBase cells) -> the
frontier's window -> the task (wire) -> the fetch result (wire, journal, segment) -> ``Page.meta``; in the
fleet's link jobs through the shuffle's partials, order-insensitively. Meta that cannot travel costs its
link a per-item error; meta off the wire that is not what a crawl writes is a schema error. And the whole
way through a ``CrawlCore`` without a network."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from fetchers import linkmeta
from fetchers.records import Batch, FetchResult, UrlTask, task_from_json
from fetchers.report import BatchReport
from fetchers.schema import SchemaError
from jobs import logic, plugged
from pipeline.crawl.core import CrawlCore
from pipeline.crawl.redirects import RedirectBook
from pipeline.dispatch.protocols import Heartbeat
from pipeline.frontier.hostqueue import HostQueue
from pipeline.links.filtering import Candidate
from pipeline.plugins.api import Item, Link, Page
from pipeline.plugins.loading import build
from pipeline.plugins.prepare import prepare_found
from pipeline.settings import Settings
from pipeline.storage.base import UrlRecord
from pipeline.storage.hbase_cells import refill_record, url_cells, url_record
from pipeline.storage.itemfiles import read_items
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.wire.messages import parse_results
from pipeline.transport.wire.replies import reply_text
from pipeline.urls import Scope, TrapRules, fingerprint, host_of

SRC, T, U = "http://a.test/", "http://a.test/t", "http://a.test/u"
META = json.dumps({"category": "shoes", "page": 2}, separators=(",", ":"))


def test_meta_is_compact_json_within_the_bound() -> None:
    assert linkmeta.encode({}) == "" and linkmeta.decode("") == {}
    assert linkmeta.encode({"category": "shoes", "page": 2}) == META and linkmeta.decode(META)["page"] == 2
    assert linkmeta.encode({"k": "é"}) == '{"k":"é"}'  # UTF-8, not escapes: the bound counts bytes
    big = {"x": "y" * linkmeta.LINK_META_MAX_BYTES}
    for bad, says in [(big, "over 4096"), ({"s": {1}}, "not JSON"), ({"n": float("nan")}, "not JSON"),
                      ({1: "x"}, "keys must be strings"), (["x"], "must be a mapping"), ({"s": "\ud800"}, "not JSON")]:  # fmt: skip
        with pytest.raises(linkmeta.LinkMetaError, match=says):
            linkmeta.encode(bad)
    assert linkmeta.valid("") and linkmeta.valid(META)
    assert not any(linkmeta.valid(v) for v in (None, 3, "[1]", "x", "{" + "x" * 5000 + "}", "{\ud800}"))


class Lister:
    name = "lister"

    def extract(self, page: Page) -> Any:
        yield Item("seen", {"url": page.url, "meta": page.meta})
        yield Link("/t", meta={"category": "shoes", "page": 2})
        yield Link("/u", meta={"blob": "x" * 5000})  # cannot travel: an error, the link dropped
        yield Link("/t", meta={"category": "later"})  # the same URL again: the first link's meta stands


def _page(url: str = SRC, meta: str = "", body: bytes = b"<html><a href='/v'>v</a></html>") -> FetchResult:
    return FetchResult(url, fingerprint(url), 0, final_url=url, status=200, content_type="text/html", body=body,
                       fetched_at=1.0, link_meta=meta)  # fmt: skip


def test_a_page_reads_the_meta_it_was_found_by_and_gives_its_links_theirs() -> None:
    plugins = build([("l", Lister())], item_max_bytes=10_000)
    assert plugins is not None
    prep = prepare_found(_page(meta=META), Settings(), plugins)
    out = prep.plugged
    assert out is not None and out.link_meta == {fingerprint(T): META}
    assert json.loads(out.items)["item"] == {"url": SRC, "meta": {"category": "shoes", "page": 2}}
    assert out.error_count == 1 and out.errors[0].startswith("item_error: lister: a Link to '/u': link meta of")
    assert sorted(u for u, _ in prep.found or []) == [T, "http://a.test/v"]  # /u dropped, /v kept


def test_the_fleet_extract_job_puts_the_meta_on_the_candidate_and_merges_it_in_any_order() -> None:
    plugins = build([("l", Lister())], item_max_bytes=10_000)
    assert plugins is not None
    cands, _, _ = plugged.page_candidates(_page(), logic.LinkRules.build(max_depth=3), plugins)
    by_url = {c.url: c for c in cands}
    assert by_url[T].link_meta == META and by_url["http://a.test/v"].link_meta == ""
    other = Candidate(T, fingerprint(T), "a.test", 1, "http://a.test/b", link_meta='{"category":"b"}')
    plain = Candidate(T, fingerprint(T), "a.test", 1, "http://a.test/0")  # the smallest source, no meta
    partials = [logic.link_value(c) for c in (by_url[T], other, plain)]
    merged = [logic.merge_link_values(T, order) for order in (partials, partials[::-1])]
    assert merged[0] == merged[1] and merged[0]["link_meta"] == META  # (depth 1, "http://a.test/") < "/b"
    assert logic.merged_to_record(merged[0]).link_meta == META
    comb = logic.LinkCombiner()
    for c in (plain, other, by_url[T]):
        comb.add(c)
    assert logic.merge_link_values(T, [v for _, v in comb.drain()]) == merged[0]
    assert "link_meta" not in logic.merge_link_values(T, [logic.link_value(plain), [1, SRC, 1, {}]])  # older partials


def test_meta_follows_a_redirect_to_its_target() -> None:
    res = dataclasses.replace(_page(meta=META), final_url=U, redirects=[SRC], status=301, body=b"")
    (cand,) = logic.page_candidates(res, logic.LinkRules.build(max_depth=3))
    assert (cand.url, cand.link_meta) == (U, META)
    book = RedirectBook(Scope.build([SRC]), TrapRules(), known=lambda _i, _u: False, publish=lambda: None)
    _, _, link = book.settled(res)
    assert link is not None and link.link_meta == META


def test_the_crawl_db_keeps_the_first_discoverys_meta(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "crawl.db")
    try:
        store.add_urls([UrlRecord(T, fingerprint(T), host_of(T), 1, link_meta=META), UrlRecord(U, fingerprint(U), host_of(U), 1)])
        store.add_urls([UrlRecord(T, fingerprint(T), host_of(T), 1, link_meta='{"later":1}'),
                        UrlRecord(U, fingerprint(U), host_of(U), 1, link_meta='{"later":1}')])  # fmt: skip
        assert {r.url: r.link_meta for r in store.pending(host_of(T), 10)} == {T: META, U: ""}
        got = store.get_url(T)
        assert got is not None and got.link_meta == META
    finally:
        store.close()
    cells = url_cells(UrlRecord(T, fingerprint(T), host_of(T), 1, link_meta=META))
    assert url_record(cells).link_meta == META and refill_record(cells, host_of(T), 1).link_meta == META
    assert b"m:M" not in url_cells(UrlRecord(U, fingerprint(U), host_of(U), 1))


def test_the_window_the_task_and_the_result_carry_it() -> None:
    q = HostQueue("a.test")
    q.push(UrlRecord(U, fingerprint(U), "a.test", 1))
    q.push(UrlRecord(T, fingerprint(T), "a.test", 1, link_meta=META))
    assert q.popleft().link_meta == ""
    task = q.popleft()
    assert task.link_meta == META and not q
    back = Batch.from_json(json.loads(json.dumps(Batch(1, "n1", [task, UrlTask(U, fingerprint(U), 1)]).to_json())))
    assert [t.link_meta for t in back.tasks] == [META, ""]
    assert Batch(1, "n1", [UrlTask(U, fingerprint(U), 1)]).to_json()["tasks"] == [[U, fingerprint(U), 1]]
    report = BatchReport(serial=1, fetcher_id="n1", pages=0, elapsed_s=0.1, unfinished=[task])
    assert BatchReport.from_json(json.loads(json.dumps(report.to_json()))).unfinished == [task]
    res = _page(T, META)
    assert FetchResult.from_json(json.loads(json.dumps(res.to_json()))).link_meta == META
    reply = reply_text("n1", "inc", [res], BatchReport(serial=1, fetcher_id="n1", pages=1, elapsed_s=0.1), segment="s")
    assert "link_meta" not in reply  # the dispatcher has no use for it: the segment has it
    assert parse_results(json.loads(reply), max_body_bytes=1 << 20).results[0].url == T


@pytest.mark.parametrize("bad", [3, "x", "[1]", "{" + "x" * 5000 + "}", None])
def test_meta_off_the_wire_that_a_crawl_never_writes_is_a_schema_error(bad: object) -> None:
    with pytest.raises(SchemaError):
        task_from_json([T, fingerprint(T), 1, "", "", 0, bad])
    with pytest.raises(SchemaError):
        FetchResult.from_json(_page(T).to_json() | {"link_meta": bad})


class Trail:
    def extract(self, page: Page) -> Any:
        yield Item("trail", {"url": page.url, "meta": page.meta})
        if page.url == SRC:
            yield Link("/t", meta={"from": page.url})


def test_a_crawl_core_hands_the_meta_from_the_finding_page_to_the_found_one(tmp_path: Path) -> None:
    plugins = build([("t", Trail())], item_max_bytes=10_000)
    now = [1000.0]
    core = CrawlCore(Settings(), SqliteStore(tmp_path / "crawl.db"), seeds=[SRC], out_dir=tmp_path,
                     clock=lambda: now[0], plugins=plugins)  # fmt: skip
    core.register_fetcher("f")
    for body in (b"<html>no links of its own</html>", b"<html>the end</html>"):
        core.on_heartbeat(Heartbeat("f", sent_at=now[0], successes=0, failures=0, rate=10.0, free_slots=10))
        batch = core.next_batch("f")
        assert batch is not None and len(batch.tasks) == 1
        t = batch.tasks[0]
        core.on_result(FetchResult(t.url, t.url_id, t.depth, final_url=t.url, status=200, content_type="text/html",
                                   body=body, serial=batch.serial, fetched_at=now[0], link_meta=t.link_meta))  # fmt: skip
        core.on_batch_done(batch.serial, fetcher_id="f", pages=1, elapsed_s=0.1)
        core.flush()
        now[0] += 10.0
    core.durable.close()
    got = {i["url"]: i["item"]["meta"] for i in read_items(str(tmp_path / "items"))}
    assert got == {SRC: {}, T: {"from": SRC}}
