"""A redirect chain spread over tasks keeps its hop count on every leg of the URL's trip.

Where a fetcher stops at redirects (a fetch process, a fleet node) each hop of a chain is a task of its
own: the target of a stopped redirect becomes a link with one hop more (``fetchers.redirects.target_hops``),
and the fetcher counts on from a task's ``redirect_hops``. The count must survive every seam a URL
crosses between the two: the crawl core's redirect book, the link jobs' candidates, partials and merged
records, both stores' rows and refills, the frontier's window, a batch, a node's reply and a report's
unfinished list. A seam that drops it restarts the chain's count, and a chain of distinct redirects is
then bounded only by the host's page cap (tests/integration/test_hostile_crawl.py). HBase's cells are
checked here at the cell seam; the real HBase round trip is tests/integration/test_hbase_store.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fetchers.records import Batch, FetchResult, UrlTask, task_from_json
from fetchers.redirects import target_hops
from fetchers.report import BatchReport
from fetchers.schema import SchemaError
from jobs import logic
from pipeline.crawl.redirects import RedirectBook
from pipeline.frontier.hostqueue import HostQueue
from pipeline.links.filtering import Candidate
from pipeline.storage.base import UrlRecord, UrlState
from pipeline.storage.hbase_cells import refill_record, url_cells, url_record
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.wire.messages import parse_results
from pipeline.transport.wire.replies import reply_text
from pipeline.urls import Scope, TrapRules, fingerprint, host_of

A, B, T = "http://a.test/r/1", "http://a.test/r/2", "http://a.test/r/3"


def stopped(*, hops: int, chain: list[str] | None = None) -> FetchResult:
    """A 302 from A whose fetcher stopped at T, A having been reached through ``hops`` redirects."""
    return FetchResult(A, fingerprint(A), 2, final_url=T, redirects=chain or [A], status=302, serial=7,
                       fetcher_id="n1", fetched_at=5.0, redirect_hops=hops)  # fmt: skip


def test_a_stopped_targets_hops_are_the_tasks_plus_the_ones_its_own_chain_made() -> None:
    assert target_hops(stopped(hops=0)) == 1
    assert target_hops(stopped(hops=3)) == 4
    assert target_hops(stopped(hops=1, chain=[A, B])) == 3  # the crawl's gate followed A -> B, stopped at T


def test_the_crawl_cores_redirect_book_gives_the_target_one_hop_more() -> None:
    book = RedirectBook(Scope.build([A]), TrapRules(), known=lambda _i, _u: False,
                        publish=lambda: None)  # fmt: skip
    _, _, link = book.settled(stopped(hops=2))
    assert link is not None and link.url == T and link.redirect_hops == 3 and link.depth == 2


def test_a_batch_a_report_and_a_reply_carry_the_hops() -> None:
    chained = UrlTask(T, fingerprint(T), 2, redirect_hops=3)
    plain = UrlTask(B, fingerprint(B), 1)
    back = Batch.from_json(json.loads(json.dumps(Batch(1, "n1", [chained, plain]).to_json())))
    assert back.tasks == [chained, plain]
    assert Batch(1, "n1", [plain]).to_json()["tasks"] == [[B, fingerprint(B), 1]]  # the short form stays short
    report = BatchReport(serial=1, fetcher_id="n1", pages=0, elapsed_s=0.1,
                         unfinished=[chained, UrlTask(B, fingerprint(B), 1, "e1", "lm")])  # fmt: skip
    assert BatchReport.from_json(json.loads(json.dumps(report.to_json()))).unfinished == report.unfinished
    res = stopped(hops=3)
    assert FetchResult.from_json(json.loads(json.dumps(res.to_json()))).redirect_hops == 3
    reply = reply_text("n1", "inc", [res], BatchReport(serial=7, fetcher_id="n1", pages=1, elapsed_s=0.1), segment="s1")
    pack = parse_results(json.loads(reply), max_body_bytes=1 << 20)
    assert pack.results[0].redirect_hops == 3  # the reply's slim path


@pytest.mark.parametrize("bad", [-1, True, "2", 1 << 15])
def test_a_bad_hop_count_is_a_schema_error(bad: object) -> None:
    with pytest.raises(SchemaError):
        task_from_json([T, fingerprint(T), 2, "", "", bad])
    obj = stopped(hops=1).to_json() | {"redirect_hops": bad}
    with pytest.raises(SchemaError):
        FetchResult.from_json(obj)


def test_the_link_jobs_keep_the_fewest_hops_a_url_was_reached_by() -> None:
    rules = logic.LinkRules.build(allowed_domains=("a.test",), max_depth=3)
    (cand,) = logic.page_candidates(stopped(hops=3), rules)
    assert (cand.url, cand.redirect_hops, cand.depth) == (T, 4, 2)
    assert logic.merged_to_record(logic.merge_link_values(T, [logic.link_value(cand)])).redirect_hops == 4
    linked = Candidate(T, fingerprint(T), "a.test", 3, "http://a.test/", "t")  # a page links to T as well
    comb = logic.LinkCombiner()
    comb.add(cand)
    assert logic.merge_link_values(T, [v for _, v in comb.drain()])["redirect_hops"] == 4
    comb.add(cand)
    comb.add(linked)
    merged = logic.merge_link_values(T, [v for _, v in comb.drain()])
    assert "redirect_hops" not in merged and logic.merged_to_record(merged).redirect_hops == 0
    # partials of another mapper, and of a crawlfleet before hops (4 fields), merge the same way
    assert logic.merge_link_values(T, [logic.link_value(cand), [3, "http://a.test/", 1, {}]]).get("redirect_hops") is None


def test_the_sqlite_store_keeps_the_hops_of_a_new_url_only(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "crawl.db")
    try:
        store.add_urls([UrlRecord(T, fingerprint(T), host_of(T), 2, redirect_hops=4),
                        UrlRecord(B, fingerprint(B), host_of(B), 1)])  # fmt: skip
        store.add_urls([UrlRecord(T, fingerprint(T), host_of(T), 2, redirect_hops=1)])  # known: first discovery kept
        by_url = {r.url: r for r in store.pending(host_of(T), 10)}
        assert by_url[T].redirect_hops == 4 and by_url[B].redirect_hops == 0
        got = store.get_url(T)
        assert got is not None and got.redirect_hops == 4 and got.state is UrlState.PENDING
    finally:
        store.close()


def test_hbase_cells_carry_the_hops_only_when_there_are_some() -> None:
    rec = UrlRecord(T, fingerprint(T), host_of(T), 2, redirect_hops=4)
    cells = url_cells(rec)
    assert url_record(cells).redirect_hops == 4 and refill_record(cells, host_of(T), 2).redirect_hops == 4
    plain = url_cells(UrlRecord(B, fingerprint(B), host_of(B), 1))
    assert b"m:j" not in plain and url_record(plain).redirect_hops == 0


def test_the_frontiers_window_hands_the_hops_to_the_task() -> None:
    q = HostQueue("a.test")
    q.append(B, fingerprint(B), 1)
    q.append(T, fingerprint(T), 2, redirect_hops=4)
    assert q.popleft().redirect_hops == 0
    task = q.popleft()
    assert (task.url, task.redirect_hops) == (T, 4) and not q
