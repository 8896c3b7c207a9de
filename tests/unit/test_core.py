"""CrawlCore without a network: batches, results, expiry, exactly-once, resume from the journal."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from fetchers.records import FetchResult
from pipeline.crawl.core import CrawlCore
from pipeline.dispatch.protocols import Heartbeat
from pipeline.settings import Settings
from pipeline.storage.base import Outcome, UrlState
from pipeline.storage.sqlite import SqliteStore

SEEDS = [f"http://h{i}.test/" for i in range(3)]
PAGE = b'<html><body><a href="/a">a</a><a href="/b">b</a><a href="http://elsewhere.example/">x</a></body></html>'


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make(tmp: Path, clock: Clock, *, resume: bool = False) -> CrawlCore:
    store = SqliteStore(tmp / "crawl.db")
    return CrawlCore(Settings(), store, seeds=SEEDS, out_dir=tmp, clock=clock, resume=resume)


def ok(task_url: str, url_id: int, depth: int, serial: int) -> FetchResult:
    return FetchResult(url=task_url, url_id=url_id, depth=depth, final_url=task_url, status=200,
                       content_type="text/html", body=PAGE, serial=serial, fetched_at=1.0)


def beat(core: CrawlCore, fid: str, clock: Clock) -> None:
    core.on_heartbeat(Heartbeat(fid, sent_at=clock.now, successes=0, failures=0, rate=10.0, free_slots=10))


def test_results_discover_links_in_scope_only(tmp_path: Path) -> None:
    clock = Clock()
    core = make(tmp_path, clock)
    core.register_fetcher("f")
    batch = core.next_batch("f")
    assert batch is not None and {t.url for t in batch.tasks} == set(SEEDS)
    for t in batch.tasks:
        core.on_result(ok(t.url, t.url_id, t.depth, batch.serial))
    assert core.on_batch_done(batch.serial, fetcher_id="f", pages=3, elapsed_s=0.3)
    core.flush()  # discoveries are buffered until a flush (size, tick, refill or a starved frontier)
    assert core.frontier.pending == 6  # /a and /b on three hosts; elsewhere.example is out of scope
    assert core.store.counts()["done"] == 3


def test_a_result_prepared_by_a_parse_process_leaves_the_same_state(tmp_path: Path) -> None:
    """A parse process hands back the journal line, packed body and found links; the core must end
    where it ends when it prepares the same result itself (pipeline/embedded/parseproc.py)."""
    from pipeline.links.prepare import prepare_found

    def crawl(tmp: Path, *, prepared: bool) -> tuple[list[str], dict[str, int], bytes]:
        tmp.mkdir()
        core = make(tmp, Clock())
        core.register_fetcher("f")
        batch = core.next_batch("f")
        assert batch is not None
        for t in batch.tasks:
            res = ok(t.url, t.url_id, t.depth, batch.serial)
            if prepared:
                res.prepared = prepare_found(res, core.settings)
            core.on_result(res)
        core.on_batch_done(batch.serial, fetcher_id="f", pages=3, elapsed_s=0.3)
        core.flush()
        pending = sorted(r.url for h, _ in core.store.pending_hosts() for r in core.store.pending(h, 100))
        assert len(pending) == 6  # /a and /b on three hosts
        core.journal.close()
        journal = b"".join(p.read_bytes() for p in sorted((tmp / "segments").glob("*.jsonl")))
        return pending, core.store.counts(), journal

    assert crawl(tmp_path / "a", prepared=True) == crawl(tmp_path / "b", prepared=False)


def test_result_of_unknown_serial_is_dropped(tmp_path: Path) -> None:
    core = make(tmp_path, Clock())
    core.on_result(ok(SEEDS[0], 1, 0, serial=999))
    assert core.dropped_results == 1 and core.store.counts()["done"] == 0


def test_expired_batch_requeues_only_unanswered_urls(tmp_path: Path) -> None:
    clock = Clock()
    core = make(tmp_path, clock)
    core.register_fetcher("f")
    beat(core, "f", clock)
    batch = core.next_batch("f")
    assert batch is not None
    first = batch.tasks[0]
    core.on_result(ok(first.url, first.url_id, 0, batch.serial))
    clock.now += 60  # silent for far more than two heartbeat periods: dead
    core.tick()
    assert core.in_flight == 0
    core.register_fetcher("g")
    beat(core, "g", clock)
    again = core.next_batch("g")
    assert again is not None
    assert first.url not in {t.url for t in again.tasks}
    assert {t.url for t in again.tasks if t.depth == 0} == {t.url for t in batch.tasks[1:]}
    # the dead fetcher's late result is dropped, never stored twice
    core.on_result(ok(batch.tasks[1].url, batch.tasks[1].url_id, 0, batch.serial))
    assert core.dropped_results == 1


def test_re_registration_forgets_the_old_incarnations_batch(tmp_path: Path) -> None:
    clock = Clock()
    core = make(tmp_path, clock)
    core.register_fetcher("f")
    assert core.next_batch("f") is not None and core.in_flight == 1
    core.register_fetcher("f")
    assert core.in_flight == 0 and not core.done()
    assert core.next_batch("f") is not None


def test_resume_replays_journal_without_refetch(tmp_path: Path) -> None:
    clock = Clock()
    core = make(tmp_path, clock)
    core.register_fetcher("f")
    batch = core.next_batch("f")
    assert batch is not None
    for t in batch.tasks:
        core.on_result(ok(t.url, t.url_id, 0, batch.serial))
    # crash: journaled but never flushed to the store
    core.journal.close()
    core.store.close()
    again = make(tmp_path, clock, resume=True)
    assert again.store.counts()["done"] == 3
    for u in SEEDS:
        rec = again.store.get_url(u)
        assert rec is not None and rec.state is UrlState.DONE
    assert again.frontier.pending == 6
    # The seen-table is warmed from the store: every known URL (3 done + 6 pending), nothing else.
    assert again.seen.table is not None and len(again.seen.table) == 9


def test_add_seeds_respects_scope_and_dedup(tmp_path: Path) -> None:
    core = make(tmp_path, Clock())
    assert core.add_seeds(["http://h0.test/new", "http://h0.test/", "http://other.example/"]) == 1


class SlowStore(SqliteStore):
    def record_results(self, outcomes: Sequence[Outcome]) -> int:
        time.sleep(0.002)  # widens the time outcomes wait on the write-behind queue, unapplied
        return super().record_results(outcomes)


def test_write_behind_fetches_every_url_once_through_spills_and_refills(tmp_path: Path) -> None:
    """150 links on one host overflow its RAM window, so refills read the store while outcomes are
    still on the writer's queue; none of those may come back."""
    wide = b"<html><body>" + b"".join(b'<a href="/p%d">x</a>' % i for i in range(150)) + b"</body></html>"
    clock = Clock()
    seeds = ["http://h0.test/"]
    core = CrawlCore(Settings(), SlowStore(tmp_path / "crawl.db"), seeds=seeds, out_dir=tmp_path, clock=clock,
                     write_behind=True)  # fmt: skip
    core.register_fetcher("f")
    fetched: list[str] = []
    for _ in range(5000):
        clock.now += 5.0  # past any politeness gap
        beat(core, "f", clock)
        batch = core.next_batch("f")
        if batch is None:
            if core.done():
                break
            continue
        for t in batch.tasks:
            fetched.append(t.url)
            result = ok(t.url, t.url_id, t.depth, batch.serial)
            result.body = wide if t.depth == 0 else b"<html></html>"
            core.on_result(result)
        core.flush()
        core.on_batch_done(batch.serial, fetcher_id="f", pages=len(batch.tasks), elapsed_s=0.1)
    core.close()
    assert len(fetched) == len(set(fetched)) == 151
    assert core.store.counts()["done"] == 151


def test_on_host_done_releases_one_host_of_a_batch_in_flight(tmp_path: Path) -> None:
    clock = Clock()
    core = make(tmp_path, clock)
    core.register_fetcher("f")
    core.register_fetcher("g")
    batch = core.next_batch("f")
    assert batch is not None and len(batch.tasks) == 3
    first = batch.tasks[0]
    core.on_result(ok(first.url, first.url_id, 0, batch.serial))
    host = first.url.split("/")[2]
    assert not core.on_host_done(batch.serial, fetcher_id="g", host=host, delay_s=0.0)  # not g's batch
    assert not core.on_host_done(999, fetcher_id="f", host=host, delay_s=0.0)  # unknown batch
    assert core.on_host_done(batch.serial, fetcher_id="f", host=host, delay_s=0.0)
    released = core.frontier.host(host)
    assert released is not None and released.leased_to == ""
    # The batch's other hosts stay leased to f until it ends.
    others = [core.frontier.host(t.url.split("/")[2]) for t in batch.tasks[1:]]
    assert all(other is not None and other.leased_to == "f" for other in others)


def test_summary_says_the_quota_or_that_there_is_none(tmp_path: Path) -> None:
    """S1 (#19): a crawl's summary names its quota, or says the crawl ran unlimited without a quota file."""
    from pipeline.dispatch.quotas import Quotas

    core = make(tmp_path / "free", Clock())
    assert core.summary()["quota"] == "unlimited (no quota file)"
    core.close()
    quotas = tmp_path / "quotas.toml"
    quotas.write_text("[services]\ndefault = 12.5\n")
    settings = Settings().with_overrides({"dispatch": {"quotas_file": str(quotas)}})
    (tmp_path / "q").mkdir()
    store = SqliteStore(tmp_path / "q" / "crawl.db")
    core = CrawlCore(settings, store, seeds=SEEDS, out_dir=tmp_path / "q", clock=Clock(),
                     quotas=Quotas.load(quotas))  # fmt: skip
    assert core.summary()["quota"] == f"12.5 URLs/s from {quotas}"
    core.close()
