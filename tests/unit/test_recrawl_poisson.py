"""Re-crawling under the Poisson policy and work conservation (#23 point 8): the Recrawler solves each
host's mu so that the host's intervals spend its fetch budget, and a work-conserving crawl brings the URLs
due soonest back early when its frontier runs dry. Real SQLite store, no network."""

from __future__ import annotations

import dataclasses
from email.utils import formatdate
from pathlib import Path

import pytest

from fetchers.records import Batch, FetchResult
from pipeline.crawl.core import CrawlCore
from pipeline.crawl.revisits import Recrawler
from pipeline.dispatch.protocols import Heartbeat
from pipeline.frontier.schedule import optimal_interval
from pipeline.settings import Settings
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Outcome, Revisit, UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint

SEED = "http://h.test/"
T0 = 100.0


def settings(**recrawl: object) -> Settings:
    cfg = RecrawlSettings(enabled=True, initial_interval_s=T0, min_interval_s=5.0, max_interval_s=5000.0,
                          check_interval_s=0.0, sync_delta=False, sitemaps=False, **recrawl)  # type: ignore[arg-type]  # fmt: skip
    return dataclasses.replace(Settings(), recrawl=cfg)


def result(url: str, at: float, body: bytes, *, last_modified: str = "") -> FetchResult:
    headers = {"last-modified": last_modified} if last_modified else {}
    return FetchResult(url=url, url_id=fingerprint(url), depth=0, final_url=url, status=200,
                       content_type="text/html", body=body, body_bytes=len(body), headers=headers, fetched_at=at)  # fmt: skip


@pytest.mark.parametrize(("pages_per_t0", "dated"), [(10, False), (10, True), (3, True)])
def test_each_host_mu_spends_its_budget_and_gives_up_pages_it_cannot_follow(
    tmp_path: Path, pages_per_t0: int, dated: bool
) -> None:
    """Three of ten pages change at every visit, the others never. With enough budget the changing ones
    come back far sooner than the static ones; with a tight budget and Last-Modified a second before each
    fetch (``dated``: they change far faster than any revisit) they are given up (the max interval)."""
    budget = pages_per_t0 / T0
    rc = Recrawler(settings(policy="poisson", host_budget_rps=budget).recrawl, SqliteStore(tmp_path / "crawl.db"))
    urls = [f"http://h.test/p{k}" for k in range(10)]
    state: dict[str, object] = {}
    last: dict[str, float] = {}
    t = 1000.0
    for rnd in range(12):
        for k, url in enumerate(urls):
            t += T0 / 10
            body = f"v{rnd}".encode() if k < 3 else b"same"  # three pages change at every visit
            rc.note_pending([])  # nothing pending: the previous revisit is passed through _prev below
            if url in state:
                rc._prev[fingerprint(url)] = state[url]  # type: ignore[assignment]
            lm = formatdate(t - 1.0, usegmt=True) if dated and k < 3 else ""
            out, _ = rc.on_outcome(
                result(url, t, body, last_modified=lm), Outcome(url, fingerprint(url), UrlState.DONE, 200, t)
            )
            assert out.revisit is not None
            state[url], last[url] = out.revisit, out.revisit.next_fetch - t
    mu = rc.host_mu("h.test")
    assert mu is not None
    spent = sum(1 / w for w in last.values())
    if pages_per_t0 == 10:  # enough budget: it is spent, and the changing pages come back sooner
        assert 0.5 * budget < spent < 1.5 * budget, (spent, last)
        assert max(last[u] for u in urls[:3]) < min(last[u] for u in urls[3:]), last
    else:  # chasing them would cost the static pages' freshness for nothing: given up
        assert all(last[u] == 5000.0 for u in urls[:3]), last
        assert spent < 1.5 * budget, (spent, last)  # never more than the budget (less at the give-up step)
        assert optimal_interval(1.0, mu) == float("inf")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def fetch_once(core: CrawlCore, clock: Clock) -> Batch:
    core.on_heartbeat(Heartbeat("f", sent_at=clock.now, successes=0, failures=0, rate=10.0, free_slots=10))
    batch = core.next_batch("f")
    assert batch is not None and len(batch.tasks) == 1
    t = batch.tasks[0]
    core.on_result(FetchResult(url=t.url, url_id=t.url_id, depth=t.depth, final_url=t.url, status=200,
                               content_type="text/html", body=b"<p>x</p>", body_bytes=8, headers={},
                               serial=batch.serial, fetched_at=clock.now))  # fmt: skip
    core.on_batch_done(batch.serial, fetcher_id="f", pages=1, elapsed_s=0.1)
    core.flush()
    return batch


def test_work_conserving_brings_the_soonest_due_url_back_early(tmp_path: Path) -> None:
    for conserving in (False, True):
        clock = Clock()
        out = tmp_path / str(conserving)
        out.mkdir()
        core = CrawlCore(settings(work_conserving=conserving), SqliteStore(out / "crawl.db"), seeds=[SEED],
                         out_dir=out, clock=clock)  # fmt: skip
        core.register_fetcher("f")
        fetch_once(core, clock)
        clock.now += 1.0  # long before the URL is due (T0 = 100 s)
        core.tick()
        core.on_heartbeat(
            Heartbeat("f", sent_at=clock.now, successes=0, failures=0, rate=10.0, free_slots=10)
        )
        again = core.next_batch("f")
        if conserving:
            assert again is not None and again.tasks[0].url == SEED
        else:
            assert again is None or not again.tasks


def test_work_conserving_in_the_fleet_knows_hosts_from_its_leases(tmp_path: Path) -> None:
    """The fleet's dispatcher sees no outcome: the node records it and the link jobs' crawl-db update plans
    the next fetch (``put_revisits``). The hosts it leased are still known to the work-conserving rule."""
    clock = Clock()
    store = SqliteStore(tmp_path / "crawl.db")
    core = CrawlCore(settings(work_conserving=True), store, seeds=[SEED], out_dir=tmp_path, clock=clock)
    core.register_fetcher("f")
    core.on_heartbeat(Heartbeat("f", sent_at=clock.now, successes=0, failures=0, rate=10.0, free_slots=10))
    batch = core.next_batch("f")
    assert batch is not None and [t.url for t in batch.tasks] == [SEED]
    t = batch.tasks[0]
    store.record_results([Outcome(t.url, t.url_id, UrlState.DONE, status=200, fetched_at=clock.now)])  # the node
    store.put_revisits([(SEED, Revisit(next_fetch=clock.now + T0, interval=T0, fetched_at=clock.now))])  # the jobs
    core.on_batch_done(batch.serial, fetcher_id="f", pages=1, elapsed_s=0.1)
    clock.now += 1.0  # long before the URL is due
    core.tick()
    core.on_heartbeat(Heartbeat("f", sent_at=clock.now, successes=0, failures=0, rate=10.0, free_slots=10))
    again = core.next_batch("f")
    assert again is not None and [t.url for t in again.tasks] == [SEED]


def test_a_host_the_frontier_no_longer_holds_gets_no_early_refetch(tmp_path: Path) -> None:
    """A dispatcher shard that handed a host on (``Frontier.forget``) leaves its re-fetches to the new owner."""
    clock = Clock()
    store = SqliteStore(tmp_path / "crawl.db")
    core = CrawlCore(settings(work_conserving=True), store, seeds=[SEED], out_dir=tmp_path, clock=clock)
    core.register_fetcher("f")
    fetch_once(core, clock)
    assert core.frontier.forget("h.test") is not None
    clock.now += 1.0
    core.tick()
    assert store.get_revisit(SEED) is not None  # scheduled, not due for T0 s
    assert "h.test" not in {h for h, _ in store.pending_hosts()}
