"""CrawlCore with re-crawling on, without a network: due URLs come back with their validators, a 304 keeps
the stored page, a changed page replaces it, a continuous crawl is not done until its stop file exists."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fetchers.records import Batch, FetchResult
from pipeline.crawl.core import CrawlCore
from pipeline.dispatch.protocols import Heartbeat
from pipeline.frontier.observation import content_digest
from pipeline.settings import Settings
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.sqlite import SqliteStore

SEED = "http://h.test/"
V1 = b"<html><body>version one</body></html>"
V2 = b"<html><body>version two</body></html>"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make(tmp: Path, clock: Clock, *, resume: bool = False, **recrawl: object) -> CrawlCore:
    recrawl.setdefault("policy", "nutch")  # these tests follow Nutch's intervals
    cfg = RecrawlSettings(enabled=True, initial_interval_s=100.0, min_interval_s=10.0, max_interval_s=1000.0,
                          check_interval_s=0.0, sync_delta=False, sitemaps=False, **recrawl)  # type: ignore[arg-type]  # fmt: skip
    settings = dataclasses.replace(Settings(), recrawl=cfg)
    return CrawlCore(settings, SqliteStore(tmp / "crawl.db"), seeds=[] if resume else [SEED], out_dir=tmp,
                     clock=clock, resume=resume)  # fmt: skip


def one_batch(core: CrawlCore, clock: Clock) -> Batch:
    core.on_heartbeat(Heartbeat("f", sent_at=clock.now, successes=0, failures=0, rate=10.0, free_slots=10))
    batch = core.next_batch("f")
    assert batch is not None and len(batch.tasks) == 1
    return batch


def answer(core: CrawlCore, batch: Batch, clock: Clock, *, status: int, body: bytes, etag: str) -> None:
    t = batch.tasks[0]
    core.on_result(FetchResult(
        url=t.url, url_id=t.url_id, depth=t.depth, final_url=t.url, status=status, content_type="text/html",
        body=body, body_bytes=len(body), headers={"etag": etag} if etag else {}, serial=batch.serial,
        fetched_at=clock.now,
    ))  # fmt: skip
    core.on_batch_done(batch.serial, fetcher_id="f", pages=1, elapsed_s=0.1)
    core.flush()


def test_a_due_url_comes_back_conditional_and_a_304_keeps_the_page(tmp_path: Path) -> None:
    clock = Clock()
    core = make(tmp_path, clock)
    core.register_fetcher("f")
    first = one_batch(core, clock)
    assert first.tasks[0].etag == ""
    answer(core, first, clock, status=200, body=V1, etag='"v1"')
    assert core.done()  # not continuous: a crawl with nothing due ends as before
    stored = core.store.get_revisit(SEED)
    assert stored is not None and stored.next_fetch == clock.now + 100.0 and stored.etag == '"v1"'
    assert stored.digest == content_digest(V1)

    clock.now += 50.0
    core.tick()
    assert core.next_batch("f") is None  # not due yet
    clock.now += 60.0
    core.tick()
    again = one_batch(core, clock)
    assert (again.tasks[0].url, again.tasks[0].etag) == (SEED, '"v1"')
    answer(core, again, clock, status=304, body=b"", etag="")
    page = core.store.get_page(SEED)
    assert page is not None and page.body == V1 and page.status == 200
    after = core.store.get_revisit(SEED)
    assert after is not None and after.interval == 140.0 and after.fetches == 2 and after.etag == '"v1"'
    assert core.summary()["recrawl"]["not_modified"] == 1
    assert core.store.counts()["pages"] == 1


def test_a_changed_page_replaces_the_copy_and_shrinks_the_interval(tmp_path: Path) -> None:
    clock = Clock()
    core = make(tmp_path, clock, conditional_get=False)
    core.register_fetcher("f")
    answer(core, one_batch(core, clock), clock, status=200, body=V1, etag='"v1"')
    clock.now += 100.0
    core.tick()
    again = one_batch(core, clock)
    assert again.tasks[0].etag == ""  # conditional GET off: a plain re-fetch
    answer(core, again, clock, status=200, body=V2, etag='"v2"')
    page = core.store.get_page(SEED)
    assert page is not None and page.body == V2
    r = core.store.get_revisit(SEED)
    assert r is not None and r.interval == 80.0 and r.changes == 1 and r.digest == content_digest(V2)
    clock.now += 80.0
    core.tick()
    same = one_batch(core, clock)
    answer(core, same, clock, status=200, body=V2, etag='"v2"')  # a server ignoring validators: same digest
    assert core.summary()["recrawl"]["unchanged"] == 1
    assert core.store.counts()["pages"] == 1


def test_continuous_is_not_done_until_the_stop_file(tmp_path: Path) -> None:
    clock = Clock()
    stop = tmp_path / "stop"
    core = make(tmp_path, clock, continuous=True, stop_file=str(stop))
    core.register_fetcher("f")
    answer(core, one_batch(core, clock), clock, status=200, body=V1, etag="")
    assert not core.done()
    stop.write_text("")
    assert core.done()


def test_due_urls_come_back_at_the_recrawl_share_while_new_urls_wait(tmp_path: Path) -> None:
    from pipeline.crawl.revisits import Recrawler
    from pipeline.storage.base import Outcome, Revisit, UrlRecord, UrlState
    from pipeline.urls import fingerprint

    store = SqliteStore(tmp_path / "crawl.db")
    urls = [f"http://h.test/{i}" for i in range(10)]
    store.add_urls([UrlRecord(u, fingerprint(u), "h.test", 0) for u in urls])
    store.record_results(
        [Outcome(u, fingerprint(u), UrlState.DONE, 200, 1.0, revisit=Revisit(5.0, 4.0)) for u in urls]
    )
    cfg = RecrawlSettings(enabled=True, requeue_batch=4, recrawl_share=0.5, check_interval_s=0.0)
    rc = Recrawler(cfg, store)
    assert rc.due(10.0, backlog=100) == {"h.test": 2}  # new URLs wait: half the batch
    assert rc.due(11.0, backlog=0) == {"h.test": 4}  # nothing waits: the whole batch
    assert rc.stats.requeued == 6


def test_a_resumed_recrawl_takes_its_due_urls_before_deciding_it_is_done(tmp_path: Path) -> None:
    """A run that starts with nothing pending but URLs due must fetch them. Before, ``done()`` was asked
    before the first ``tick()`` requeued them, so the run ended at once with 0 pages (and the final tick
    left them PENDING for the next run); a run with nothing due ends as before."""
    clock = Clock()
    core = make(tmp_path, clock)
    core.register_fetcher("f")
    answer(core, one_batch(core, clock), clock, status=200, body=V1, etag="")
    assert core.done()
    core.close()
    clock.now += 50.0  # nothing due yet
    early = make(tmp_path, clock, resume=True)
    assert early.done() and early.frontier.pending == 0
    early.close()
    clock.now += 60.0  # the seed is due
    late = make(tmp_path, clock, resume=True)
    assert not late.done() and late.frontier.pending == 1
    late.register_fetcher("f")
    assert [t.url for t in one_batch(late, clock).tasks] == [SEED]
    late.close()
