"""The design card's loop, piece by piece: the node's sink, the one reply, the links report, the
dispatcher core that never parses, and the link-jobs service's rounds (with a real SQLite store;
the mrjob pipeline and the broker are the seams)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from fetchers.records import Batch, FetchResult, UrlTask
from fetchers.report import BatchReport
from jobs.logic import traps_arg, traps_from_arg
from pipeline.crawl.core import CrawlCore
from pipeline.crawl.outcome import outcome_of
from pipeline.frontier.frontier import Frontier
from pipeline.settings import Settings
from pipeline.storage.base import UrlRecord, UrlState
from pipeline.storage.segments import Segments
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.links.rules import CrawlLinkRules
from pipeline.transport.node.sink import NodeSink
from pipeline.transport.wire.messages import BadMessage, parse_results
from pipeline.transport.wire.replies import LinksReport, parse_links, reply_text
from pipeline.transport.wire.sink import SinkSpec, crawl_sink
from pipeline.urls import TrapRules, fingerprint, host_of
from tests.unit.test_core import PAGE, SEEDS, Clock, beat, make, ok

URL = "http://h0.test/"


def result(url: str = URL, *, serial: int = 7, error: str = "", body: bytes = PAGE) -> FetchResult:
    return FetchResult(url=url, url_id=fingerprint(url), depth=0, final_url=url, status=0 if error else 200,
                       content_type="text/html", body=b"" if error else body, serial=serial, fetched_at=1.0,
                       error_class=error, headers={"Server": "x" * 300})  # fmt: skip


def batch_of(*urls: str, serial: int = 7) -> Batch:
    return Batch(serial, "node#0", [UrlTask(u, fingerprint(u), 0) for u in urls], service="svc", issued_at=12.5)


# --- outcome ---------------------------------------------------------------------------------------
def test_outcome_of_maps_states_and_keeps_the_page_only_when_done() -> None:
    assert outcome_of(result(), keep_body=True).page is not None
    assert outcome_of(result(), keep_body=False).page.body == b""  # type: ignore[union-attr]
    blocked = outcome_of(result(error="robots_blocked"), keep_body=True)
    assert (blocked.state, blocked.page) == (UrlState.BLOCKED, None)
    assert outcome_of(result(error="dns_nxdomain"), keep_body=True).state is UrlState.FAILED


# --- the sink --------------------------------------------------------------------------------------
def test_sink_spec_round_trips_and_refuses_what_it_does_not_make() -> None:
    spec = SinkSpec("sqlite:/a/crawl.db", "/a/segs", "", keep_body=True)
    assert SinkSpec.from_json(spec.to_json()) == spec and SinkSpec.from_json(None) is None
    for bad in ({"store": "sqlite:rel", "segments": "/a", "warc": "", "keep_body": True},
                {"store": "hbase", "segments": "rel", "warc": "", "keep_body": True},
                {"store": "hbase", "segments": "/a/../etc", "warc": "", "keep_body": True},
                {"store": "mysql://x", "segments": "/a", "warc": "", "keep_body": True},
                {"store": "hbase", "segments": "/a", "warc": "", "keep_body": 1},
                {"store": "hbase", "segments": "/a"}):  # fmt: skip
        with pytest.raises(ValueError):
            SinkSpec.from_json(bad)
    assert spec.overridden(segments="/b").segments == "/b" and spec.overridden().store == spec.store


def test_crawl_sink_names_the_dispatchers_store_and_segments(tmp_path: Path) -> None:
    sink = crawl_sink(Settings(), tmp_path / "out")
    assert sink.store == f"sqlite:{(tmp_path / 'out' / 'crawl.db').resolve()}"
    assert sink.segments == str((tmp_path / "out" / "node-segments").resolve()) and not sink.warc
    hb = crawl_sink(Settings().with_overrides({"store": {"kind": "hbase", "hbase_prefix": "p"}}), tmp_path)
    assert hb.store == "hbase://127.0.0.1:9090/p"


def test_node_sink_writes_a_closed_segment_then_the_final_outcomes(tmp_path: Path) -> None:
    db = tmp_path / "crawl.db"
    store = SqliteStore(db)
    urls = [URL, "http://h1.test/", "http://h2.test/"]
    store.add_urls([UrlRecord(u, fingerprint(u), u.split("/")[2], 0) for u in urls])
    store.close()
    sink = NodeSink(SinkSpec(f"sqlite:{db}", str(tmp_path / "segs")), node="n1")
    results = [result(urls[0]), result(urls[1], error="dns_nxdomain"), result(urls[2], error="throttled")]
    receipt = sink.write_batch(batch_of(*urls), results)
    sink.close()
    seg = Path(receipt.segment)
    assert seg.parent == tmp_path / "segs" / "n1" and seg.name == "svc-000000007-12500-0000.jsonl"
    assert not list(seg.parent.glob("*.part"))
    lines = [json.loads(x) for x in seg.read_text().splitlines()]
    assert [x["url"] for x in lines] == urls and lines[0]["body_lz4"]  # every result, body included
    assert receipt.stored == 2  # the retry-later one is the dispatcher's to decide
    store = SqliteStore(db)
    try:
        assert store.get_url(urls[0]).state is UrlState.DONE  # type: ignore[union-attr]
        assert store.get_page(urls[0]).body == PAGE  # type: ignore[union-attr]
        assert store.get_url(urls[1]).state is UrlState.FAILED  # type: ignore[union-attr]
        assert store.get_url(urls[2]).state is UrlState.PENDING  # type: ignore[union-attr]
    finally:
        store.close()


# --- the wire --------------------------------------------------------------------------------------
def test_a_reply_carries_no_body_and_no_headers_and_parses_back() -> None:
    r = result()
    text = reply_text("n1", "inc", [r], BatchReport(7, "node#0", 1, 0.5), segment="/s/n1/x.jsonl")
    pack = parse_results(json.loads(text), max_body_bytes=1 << 20)
    assert pack.stored and pack.segment == "/s/n1/x.jsonl" and len(pack.reports) == 1
    back = pack.results[0]
    assert (back.body, back.headers, back.body_bytes, back.url) == (b"", {}, len(PAGE), URL)
    assert len(text) < 1000  # the 300-byte header and the ~100-byte body stayed home


def test_links_reports_parse_and_refuse_garbage() -> None:
    report = LinksReport(("n1/a.jsonl",), {"h0.test": 3})
    assert parse_links(report.to_json()) == report
    for bad in ({"kind": "links", "segments": "x", "hosts": {}}, {"kind": "links", "segments": [], "hosts": {"h": -1}},
                {"kind": "links", "segments": [], "hosts": {"h": True}}, {"kind": "results"}):  # fmt: skip
        with pytest.raises(BadMessage):
            parse_links(bad)


def test_crawl_link_rules_round_trip_with_scope_and_traps() -> None:
    rules = CrawlLinkRules(("a.test",), 5, 100, ("/x",), (r"/slow$",), traps_arg(TrapRules(99, 4, 1)))
    assert CrawlLinkRules.from_json(rules.to_json()) == rules
    assert traps_from_arg(rules.traps) == TrapRules(99, 4, 1) and traps_from_arg("") == TrapRules()
    args = rules.job_args(store="sqlite:/x", batch_size=10, lru_size=20).extract()
    assert args[args.index("--deny-regex") : args.index("--deny-regex") + 2] == ["--deny-regex", r"/slow$"]


# --- the dispatcher's side -------------------------------------------------------------------------
def test_frontier_add_pending_marks_the_host_for_a_refill() -> None:
    f = Frontier()
    f.add_pending("a.test", 3)
    f.add_pending("b.test", 0)
    assert f.pending == 3 and f.wants_refill() == ["a.test"] and f.host("b.test") is None


def test_stored_results_settle_without_journal_outcome_or_links(tmp_path: Path) -> None:
    clock = Clock()
    core = make(tmp_path, clock)
    core.register_fetcher("f")
    beat(core, "f", clock)
    batch = core.next_batch("f")
    assert batch is not None
    for t in batch.tasks:
        core.on_result(FetchResult(t.url, t.url_id, t.depth, status=200, serial=batch.serial), stored=True)
    assert core.on_batch_done(batch.serial, fetcher_id="f", pages=3, elapsed_s=0.3)
    core.flush()
    assert core.frontier.pending == 0 and core.stats.pages == len(SEEDS)
    assert core.store.counts()["done"] == 0  # the nodes write outcomes; the core wrote none
    assert not b"".join(p.read_bytes() for p in (tmp_path / "segments").glob("*.jsonl"))
    core.on_links({"h0.test": 2})
    assert core.frontier.pending == 2
    core.close()


def test_restore_pending_finds_what_a_lost_links_report_did_not_say(tmp_path: Path) -> None:
    clock = Clock()
    core = make(tmp_path, clock)
    assert core.restore_pending() == 0  # the seeds are known already
    extra = [UrlRecord(f"http://new.test/{i}", fingerprint(f"http://new.test/{i}"), "new.test", 1) for i in range(4)]
    core.store.add_urls(extra)  # the link jobs added them; their report never came
    assert core.restore_pending() == 4 and core.frontier.pending == len(SEEDS) + 4
    assert core.restore_pending() == 0
    core.close()


def _capped_at_one(tmp_path: Path, overrides: dict[str, Any]) -> tuple[CrawlCore, Clock, Batch | None]:
    """A core whose hosts may give one URL each (h0.test with four more in the store), and its first batch."""
    clock = Clock()
    settings = Settings().with_overrides({"scope": {"max_pages_per_host": 1}, **overrides})
    core = CrawlCore(settings, SqliteStore(tmp_path / "crawl.db"), seeds=SEEDS, out_dir=tmp_path, clock=clock)
    extra = [UrlRecord(f"http://h0.test/x{i}", fingerprint(f"http://h0.test/x{i}"), "h0.test", 1) for i in range(4)]
    core.store.add_urls(extra)
    core.register_fetcher("f")
    beat(core, "f", clock)
    return core, clock, core.next_batch("f")


def test_restore_pending_leaves_a_capped_host_alone(tmp_path: Path) -> None:
    """A host at scope.max_pages_per_host keeps its other URLs PENDING in the store; re-reading them
    before the crawl ends must not count them, or a fleet crawl with a cap never ends (found by the
    fleet's hostile crawl: 9,964 URLs 'restored' every 2 s for ever)."""
    core, _, batch = _capped_at_one(tmp_path, {})
    assert batch is not None and {host_of(t.url) for t in batch.tasks} >= {"h0.test"}
    assert core.frontier.capped("h0.test")
    assert core.restore_pending() == 0
    core.close()


def test_restore_pending_counts_only_the_refetches_of_a_capped_host_in_a_recrawl(tmp_path: Path) -> None:
    """In a re-crawl a capped host still takes its due URLs, so a re-read must find those, and only those:
    counting its new URLs as well would restore them at every check, the refill would drop them again, and
    the fleet crawl would never settle (the same trap as above, now with ``Frontier.restore`` keeping a
    capped host for its re-fetches)."""
    core, clock, batch = _capped_at_one(tmp_path, {"recrawl": {"enabled": True}})
    assert batch is not None and core.frontier.capped("h0.test")
    for t in batch.tasks:
        core.on_result(ok(t.url, t.url_id, t.depth, batch.serial))
    assert core.on_batch_done(batch.serial, fetcher_id="f", pages=len(batch.tasks), elapsed_s=0.3)
    core.flush()
    assert core.restore_pending() == 0
    assert core.restore_pending() == 0  # and again: nothing was restored that a refill would drop
    # The first batch held each host's seed (robots.txt is the fetcher's, never a crawl URL). Leases drop
    # the capped hosts' new URLs, and their re-fetches-only refills find nothing due yet. Then each seed
    # comes due without the frontier hearing of it (a lost report): the re-read finds those three, not the
    # hosts' new URLs.
    assert sorted(t.url.rsplit("/", 1)[1] for t in batch.tasks) == ["", "", ""]
    assert core.next_batch("f") is None and core.next_batch("f") is None
    assert core.frontier.pending == 0
    assert core.store.requeue_due(clock.now + 1e6, 100) == {"h0.test": 1, "h1.test": 1, "h2.test": 1}
    assert core.restore_pending() == 3
    core.close()


# --- the dispatcher's view of the link jobs --------------------------------------------------------
def test_link_progress_waits_for_every_replied_segment_then_checks_the_store() -> None:
    from pipeline.transport.dispatcher.linkprogress import PENDING_CHECK_S, SILENCE_S, LinkProgress

    now = [0.0]
    lp = LinkProgress(clock=lambda: now[0])
    found = [3]
    lp.on_report(["n1/b"])  # a report overtook its reply
    lp.on_reply("n1/a")
    lp.on_reply("n1/b")
    assert lp.awaiting == {"n1/a"} and not lp.settled(lambda: 0)
    now[0] = SILENCE_S
    assert lp.silence() == SILENCE_S and lp.silence() is None  # said once per period
    lp.on_report(["n1/a"])
    assert not lp.settled(lambda: found[0])  # the store holds pending URLs nobody reported
    found[0] = 0
    assert not lp.settled(lambda: found[0])  # the scan is rate-limited
    now[0] += PENDING_CHECK_S
    assert lp.settled(lambda: found[0])
    assert lp.settled(lambda: 99)  # stays settled, without re-reading the store, until news arrives
    lp.on_reply("n1/c")
    assert not lp.settled(lambda: 0)


def test_a_late_copy_of_a_reply_waits_for_nothing() -> None:
    """After a broker reconnect a node may publish its reply again. If the links report for its segment
    came between the two copies, counting the copy left the segment awaited for ever."""
    from pipeline.transport.dispatcher.linkprogress import PENDING_CHECK_S, LinkProgress

    now = [0.0]
    lp = LinkProgress(clock=lambda: now[0])
    lp.on_reply("n1/a")
    lp.on_report(["n1/a"])
    lp.on_reply("n1/a")  # the copy
    now[0] += PENDING_CHECK_S
    assert lp.awaiting == set() and lp.settled(lambda: 0)
    lp.on_reply("n1/b")
    lp.on_reply("n1/b")  # a copy before the report
    lp.on_report(["n1/b"])
    lp.on_reply("n1/b")  # and one after it
    now[0] += PENDING_CHECK_S
    assert lp.awaiting == set() and lp.settled(lambda: 0)
    lp.on_report(["n1/c"])  # overtook its reply
    lp.on_reply("n1/c")
    lp.on_reply("n1/c")  # its copy
    assert lp.awaiting == set() and lp.lags == [0.0, 0.0, 0.0]


def test_the_reply_of_an_expired_batch_is_awaited() -> None:
    """A node declared dead while only slow (a loaded box) still stores its batch and replies after the
    batch expired. Its pages are done in the store and their links wait for the jobs: the crawl may not
    end before the links report names the segment (it ended at its seeds, their links never crawled)."""
    from pipeline.transport.dispatcher.linkprogress import PENDING_CHECK_S, LinkProgress

    now = [0.0]
    lp = LinkProgress(clock=lambda: now[0])
    lp.on_reply("n1/a")  # whatever the state of its batch
    now[0] += PENDING_CHECK_S
    assert lp.awaiting == {"n1/a"} and not lp.settled(lambda: 0)
    lp.on_report(["n1/a"])
    now[0] += PENDING_CHECK_S
    assert lp.settled(lambda: 0)


def test_link_lag_is_reply_to_report_per_segment() -> None:
    from pipeline.transport.dispatcher.linkprogress import LinkProgress

    now = [0.0]
    lp = LinkProgress(clock=lambda: now[0])
    assert lp.lag_summary() == {"count": 0}
    lp.on_reply("n1/a")
    now[0] = 1.0
    lp.on_reply("n1/b")
    now[0] = 4.0
    lp.on_report(["n1/a", "n1/b", "n1/c"])  # n1/c's report overtook its reply: a lag of 0 when it comes
    lp.on_reply("n1/c")
    assert sorted(lp.lags) == [0.0, 3.0, 4.0]
    assert lp.lag_summary() == {"count": 3, "p50_s": 3.0, "p95_s": 4.0, "max_s": 4.0}


@pytest.mark.parametrize("failures", [1, 1000])
def test_node_sink_never_hands_back_a_chunk_whose_outcomes_are_stored(tmp_path: Path, failures: int) -> None:
    """The rename after the store write fails (a flaky filesystem): it is tried again; if it keeps failing
    the .part stays for the link jobs to adopt under the key the receipt names, and nothing raises (the
    caller would otherwise hand the stored URLs back to be fetched again)."""
    db = tmp_path / "crawl.db"
    store = SqliteStore(db)
    store.add_urls([UrlRecord(URL, fingerprint(URL), URL.split("/")[2], 0)])
    store.close()
    sink = NodeSink(SinkSpec(f"sqlite:{db}", str(tmp_path / "segs")), node="n1", close_retry_s=0.5)
    real, calls = sink.segments.close_part, []

    def flaky(part_key: str) -> str:
        calls.append(part_key)
        if len(calls) <= failures:
            raise FileNotFoundError(part_key)
        return real(part_key)

    sink.segments.close_part = flaky  # type: ignore[method-assign]
    receipt = sink.write_batch(batch_of(URL), [result(URL)])
    sink.close()
    seg = Path(receipt.segment)
    store = SqliteStore(db)
    try:
        assert store.get_url(URL).state is UrlState.DONE  # type: ignore[union-attr]
    finally:
        store.close()
    if failures == 1:
        assert seg.exists() and len(calls) == 2
    else:
        assert not seg.exists() and seg.with_name(seg.name + ".part").exists()
        segs = Segments(str(tmp_path / "segs"))
        assert [s.key for s in segs.closed(now=time.time() + 3600)] == [f"n1/{seg.name}"] and seg.exists()


def test_the_inbox_awaits_the_reply_of_a_batch_expired_here_not_one_never_issued_here() -> None:
    """``Inbound._on_results``: a reply whose batch expired in this dispatcher is awaited (its pages are
    stored, their links not yet in the pending set); one whose batch this process never issued is late."""
    from fetchers.report import BatchReport
    from pipeline.settings import load_settings
    from pipeline.transport.dispatcher.inbox import Inbound
    from pipeline.transport.dispatcher.linkprogress import LinkProgress
    from pipeline.transport.dispatcher.state import FleetCounters

    class Core:
        def on_result(self, *_a: object, **_k: object) -> None: ...
        def on_batch_done(self, *_a: object, **_k: object) -> bool:
            return False

    class Host(Inbound):
        def __init__(self) -> None:
            self.core = Core()  # type: ignore[assignment]
            self.settings = load_settings(environ={})
            self.links = LinkProgress(clock=lambda: 0.0)
            self.counters = FleetCounters()
            self._issued, self._expired, self._busy, self._serials_version = {}, {7: None}, {}, 0

    def reply(serial: int, segment: str) -> dict[str, object]:
        rep = BatchReport(serial=serial, fetcher_id="n1-1", pages=1, elapsed_s=0.1).to_json()
        return {"kind": "results", "node": "n1", "incarnation": "i", "results": [], "reports": [rep],
                "stored": True, "segment": segment}  # fmt: skip

    host = Host()
    host._on_results(reply(7, "n1/expired.jsonl"))  # expired here: the node stored its pages anyway
    host._on_results(reply(8, "n1/before.jsonl"))  # never issued by this process (its predecessor's)
    assert host.links.awaiting == {"n1/expired.jsonl"} and host.counters.late_reports == 2
