"""One item set per page version (pipeline/frontier/versions.py): the decision alone, then both scales
asking it over the same fetch history: the embedded crawl's ``Recrawler`` (an outcome without a page writes
no items) and the fleet's extract job (``item_verdict`` on the crawl-db row, whose re-crawl state the
update job, ``jobs.recrawl.schedule_results``, wrote after the previous fetch's round) keep the items of
the same fetches; ``SegmentItems`` over a real SQLite crawl db writes none for an unchanged re-fetch; and
the embedded crawl killed after an unchanged or a changed re-fetch resumes with one item set per version
(before: the replayed re-fetch was compared with nothing, gave a second item set and reset the URL's
re-crawl estimates)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from crawlfleet import Item, Page
from fetchers.records import FetchResult
from jobs import logic, plugged
from jobs.recrawl import recrawl_schedule, schedule_results
from pipeline.crawl.core import CrawlCore
from pipeline.crawl.revisits import Recrawler
from pipeline.frontier.observation import content_digest, observe
from pipeline.frontier.schedule import RECRAWL_META, Observation
from pipeline.frontier.versions import Verdict, item_verdict, replayed_prev, same_version
from pipeline.plugins.loading import build
from pipeline.settings import Settings
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Outcome, Revisit, UrlRecord, UrlState
from pipeline.storage.itemfiles import read_items
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint, host_of
from tests.unit.test_recrawl_core import SEED, V1, V2, Clock, answer, one_batch
from tests.unit.test_recrawl_scales import history

URL = "http://site.test/p/1"
OLD, NEW = content_digest(b"old"), content_digest(b"new")


def _obs(status: int = 200, digest: str = NEW, *, at: float = 20.0, failed: bool = False) -> Observation:
    return Observation(fetched_at=at, status=status, failed=failed, digest=digest)


def _prev(digest: str = OLD, *, fetches: int = 1, at: float = 10.0) -> Revisit:
    return Revisit(next_fetch=at + 60.0, interval=60.0, digest=digest, fetches=fetches, fetched_at=at)


def test_a_fetch_is_a_new_version_unless_it_confirms_the_stored_copy() -> None:
    assert not same_version(None, _obs())  # the URL's first fetch
    assert not same_version(_prev(OLD), _obs(digest=NEW))  # changed bytes (a near-duplicate too)
    assert same_version(_prev(NEW), _obs(digest=NEW))  # the stored copy's exact digest
    assert same_version(_prev(OLD), _obs(304, ""))  # not modified
    assert same_version(_prev(OLD), _obs(503, "", failed=True))  # no usable answer: the copy stands
    assert not same_version(_prev(""), _obs(digest=""))  # a stored state without a copy's digest
    assert not same_version(_prev(NEW, fetches=0), _obs(digest=NEW))  # a state no fetch made


def _row(fetched_at: float, revisit: Revisit | None) -> UrlRecord:
    return UrlRecord(URL, fingerprint(URL), "site.test", 0, UrlState.DONE, fetched_at=fetched_at, revisit=revisit)


def test_the_fleet_verdict_on_the_crawl_db_row() -> None:
    assert item_verdict(None, _obs(), check_recorded=False) is Verdict.WRITE  # a job without a crawl db
    assert item_verdict(None, _obs()) is Verdict.UNRECORDED
    assert item_verdict(_row(19.0, None), _obs(at=20.0)) is Verdict.UNRECORDED  # another fetch is recorded
    assert item_verdict(_row(20.0, None), _obs(at=20.0)) is Verdict.WRITE  # re-crawling off, or a first fetch
    assert item_verdict(_row(20.0, _prev(OLD)), _obs(digest=NEW)) is Verdict.WRITE
    assert item_verdict(_row(20.0, _prev(NEW)), _obs(digest=NEW)) is Verdict.SAME_VERSION
    assert item_verdict(_row(20.0, _prev(OLD)), _obs(304, "")) is Verdict.SAME_VERSION
    # the round ran to its update before (run again after a kill): its items were decided then
    assert item_verdict(_row(20.0, _prev(NEW, at=20.0)), _obs(digest=NEW)) is Verdict.DECIDED
    assert item_verdict(_row(20.0, _prev(NEW, fetches=1, at=20.0)), _obs(digest=NEW)) is Verdict.DECIDED


@pytest.mark.parametrize("seed", [3, 7, 11])
def test_both_scales_keep_the_items_of_the_same_fetches(tmp_path: Path, seed: int) -> None:
    cfg = RecrawlSettings(enabled=True, initial_interval_s=60.0, min_interval_s=5.0, max_interval_s=3000.0,
                          simhash_bits=0)  # fmt: skip
    results = history(seed=seed)
    rc = Recrawler(cfg, SqliteStore(tmp_path / "embedded.db"))
    stored: dict[str, Revisit] = {}
    embedded: list[bool] = []
    for r in results:
        rc.note_pending([UrlRecord(r.url, r.url_id, host_of(r.url), 0, revisit=stored.get(r.url))])
        state = UrlState.FAILED if r.error_class else UrlState.DONE
        page = object() if state is UrlState.DONE else None
        out, _ = rc.on_outcome(r, Outcome(r.url, r.url_id, state, r.status, r.fetched_at, page=page))  # type: ignore[arg-type]
        assert out.revisit is not None
        stored[r.url] = out.revisit
        embedded.append(out.page is not None)
    store = SqliteStore(tmp_path / "fleet.db")
    store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 0) for u in sorted({r.url for r in results})])
    store.put_meta(RECRAWL_META, json.dumps(dataclasses.asdict(cfg)))
    schedule = recrawl_schedule(store)
    assert schedule is not None
    fleet: list[bool] = []
    for r in results:  # the round of r: extract (reads the row), then update (writes r's re-crawl state)
        row = UrlRecord(r.url, r.url_id, host_of(r.url), 0, UrlState.DONE, fetched_at=r.fetched_at,
                        revisit=store.get_revisit(r.url))  # fmt: skip
        fleet.append(not r.error_class and item_verdict(row, observe(r)) is Verdict.WRITE)
        schedule_results(store, schedule, [r])
    store.close()
    assert fleet == embedded
    assert 0 < sum(fleet) < len([r for r in results if not r.error_class])  # some re-fetches were unchanged


class Titles:
    def extract(self, page: Page) -> Any:
        yield Item("title", {"t": page.tree.css_first("title").text(), "digest": page.digest})


def _result(body: bytes, fetched_at: float, status: int = 200) -> FetchResult:
    return FetchResult(URL, fingerprint(URL), 0, final_url=URL, status=status, content_type="text/html",
                       body=body, body_bytes=len(body), fetched_at=fetched_at)  # fmt: skip


def test_an_unchanged_refetch_writes_no_item_set_and_a_changed_one_does(tmp_path: Path) -> None:
    """The extract job's side over a real SQLite crawl db, each fetch recorded as a node records it and
    scheduled by the update job after its round; the round of the unchanged re-fetch also run again."""
    plugins = build([("t", Titles())], item_max_bytes=1000)
    assert plugins is not None
    rules = logic.LinkRules.build(max_depth=5)
    store = SqliteStore(tmp_path / "crawl.db")
    cfg = RecrawlSettings(enabled=True, initial_interval_s=60.0, min_interval_s=5.0, max_interval_s=600.0)
    store.put_meta(RECRAWL_META, json.dumps(dataclasses.asdict(cfg)))
    schedule = recrawl_schedule(store)
    assert schedule is not None
    store.add_urls([UrlRecord(URL, fingerprint(URL), "site.test", 0)])
    root = str(tmp_path / "items")
    one, two = b"<html><title>One</title></html>", b"<html><title>Two</title></html>"
    counts: list[dict[str, int]] = []
    for n, (body, at) in enumerate([(one, 100.0), (one, 200.0), (two, 300.0), (two, 400.0)]):
        if n:
            assert store.requeue_due(at + 1e6, 10) == {"site.test": 1}  # due again: PENDING
        result = _result(body, at)
        store.record_results([Outcome(URL, result.url_id, UrlState.DONE, 200, at)])
        for again in (False, True):  # the round; then the same round run again after a kill in its update
            seg = plugged.SegmentItems()
            seg.add(result, plugged.page_candidates(result, rules, plugins)[1])
            counts.append(seg.write(root, f"n1/seg-{n}", fmt="jsonl", store=store))
            if not again:
                schedule_results(store, schedule, [result])  # the round's update
    got = [(i["fetched_at"], i["item"]["t"]) for i in read_items(root)]
    assert got == [(100.0, "One"), (300.0, "Two")]
    assert [c["items"] for c in counts] == [1, 0, 0, 0, 1, 0, 0, 0]
    assert [c["exists"] for c in counts] == [0, 1, 0, 0, 0, 1, 0, 0]  # the file of a round with items
    assert [c["same_version"] for c in counts] == [0, 0, 1, 0, 0, 0, 1, 0]
    assert [c["decided"] for c in counts] == [0, 0, 0, 1, 0, 0, 0, 1]  # no file: decided by the stored state
    store.close()


def test_a_replayed_fetch_is_compared_with_the_state_its_lease_saw() -> None:
    before = _prev(OLD, at=10.0)
    assert replayed_prev(None, None, 20.0) is None  # the URL's first fetch
    assert replayed_prev(before, 10.0, 20.0) is before  # its outcome never reached the store
    mine = _prev(NEW, fetches=2, at=20.0)  # applied before the kill: the state is this fetch's
    assert replayed_prev(mine, 20.0, 20.0) is None  # and so is the page: a new version
    assert replayed_prev(mine, 10.0, 20.0) is mine  # the page is older: the fetch confirmed it


class Body:
    def extract(self, page: Page) -> Any:
        yield Item("body", {"at": page.fetched_at})


def _core(tmp: Path, clock: Clock, *, resume: bool = False) -> CrawlCore:
    cfg = RecrawlSettings(enabled=True, policy="nutch", initial_interval_s=100.0, min_interval_s=10.0,
                          max_interval_s=1000.0, check_interval_s=0.0, sync_delta=False, sitemaps=False)  # fmt: skip
    plugins = build([("b", Body())], item_max_bytes=1000)
    return CrawlCore(dataclasses.replace(Settings(), recrawl=cfg), SqliteStore(tmp / "crawl.db"),
                     seeds=[] if resume else [SEED], out_dir=tmp, clock=clock, resume=resume, plugins=plugins)  # fmt: skip


@pytest.mark.parametrize("applied", [False, True], ids=["killed-before-the-store", "killed-before-the-commit"])
@pytest.mark.parametrize("body", [V1, V2], ids=["unchanged", "changed"])
def test_an_embedded_crawl_killed_after_a_refetch_resumes_with_one_item_set_per_version(
    tmp_path: Path, applied: bool, body: bytes
) -> None:
    clock = Clock()
    core = _core(tmp_path, clock)
    core.register_fetcher("f")
    answer(core, one_batch(core, clock), clock, status=200, body=V1, etag="")  # items of V1, committed
    clock.now += 200.0
    core.tick()
    batch = one_batch(core, clock)
    t = batch.tasks[0]
    core.on_result(FetchResult(t.url, t.url_id, t.depth, final_url=t.url, status=200, content_type="text/html",
                               body=body, body_bytes=len(body), serial=batch.serial, fetched_at=clock.now))  # fmt: skip
    if applied:
        core._flush_store()  # the outcome reaches the store; the items' commit waits for the checkpoint
    # SIGKILL here: the journal holds the re-fetch (os.write), the item log's tail past its commit goes
    clock.now += 1.0
    again = _core(tmp_path, clock, resume=True)
    again.flush()
    got = [i["item"]["at"] for i in read_items(str(tmp_path / "items"))]
    assert got == ([1_000_000.0] if body == V1 else [1_000_000.0, 1_000_200.0])
    stored = again.store.get_revisit(SEED)
    assert stored is not None and stored.fetches == 2 and stored.changes == (body == V2)
    again.durable.close()
