"""A page that kills the fleet's extract job does not stop the link path (pipeline/transport/links/quarantine.py).

One segment holds, among normal pages, a page of 60,000 nested <div> (lexbor needs about 2 s of CPU for
it; the tests' limit is 0.3 s). ``crawlfleet links`` on the real link jobs (inline runner: the task dies
in the service's worker process; local runner: in a mapper subprocess) fails that round twice, sets the
page aside, and then gives the crawl db every other page's links, as a pass over the same segments
without the page does. The page's own links are the only loss, and the store records why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fetchers.records import FetchResult
from jobs.runner import LinkPipeline
from jobs.runnerconfig import RunnerConfig
from jobs.synth import make_results, write_segment
from pipeline.frontier.schedule import RECRAWL_META
from pipeline.storage.base import UrlRecord
from pipeline.storage.segments import Segments
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.links.quarantine import GUARD_DIR, META_PREFIX, QUARANTINE_FILE
from pipeline.transport.links.rules import RULES_KEY, CrawlLinkRules
from pipeline.transport.links.service import LinkJobsService
from pipeline.transport.wire.replies import LinksReport
from pipeline.urls import fingerprint, host_of

pytestmark = pytest.mark.integration

RULES = CrawlLinkRules(("crawl.test",), 5, 10_000)
CPU_LIMIT_S = 0.3


def bomb_page(host: str) -> FetchResult:
    url = f"http://{host}/bomb.html"
    body = b"<html><body>" + b"<div>" * 60_000 + f'<a href="http://{host}/only-from-bomb">x</a>'.encode()
    return FetchResult(url=url, url_id=fingerprint(url), depth=1, final_url=url, status=200,
                       headers={"content-type": "text/html"}, content_type="text/html", body=body)  # fmt: skip


def pending(db: Path) -> dict[str, int]:
    with SqliteStore(db) as store:
        return {rec.url: rec.inlinks for host, _ in store.pending_hosts() for rec in store.pending(host, 100_000)}


def new_store(db: Path) -> str:
    with SqliteStore(db) as store:
        store.put_meta(RULES_KEY, RULES.to_json())
    return f"sqlite:{db}"


@pytest.mark.parametrize("runner", ["inline", "local"])
def test_a_page_that_kills_extract_tasks_is_set_aside_and_the_rest_goes_on(tmp_path: Path, runner: str) -> None:
    results = list(make_results(60, hosts=3, links=12, page_bytes=3000, seed=7, error_rate=0.0))
    bomb = bomb_page(results[0].url.split("/")[2])
    root = tmp_path / "segs"
    segs = [root / "node0" / "svc-000000001-1.jsonl", root / "node1" / "svc-000000002-1.jsonl"]
    write_segment(segs[0], results[:30])
    write_segment(segs[1], [*results[30:45], bomb, *results[45:]])
    # What the crawl db must hold: one pass over the same pages without the bomb.
    ref_segs = [tmp_path / "ref" / "a.jsonl", tmp_path / "ref" / "b.jsonl"]
    write_segment(ref_segs[0], results[:30])
    write_segment(ref_segs[1], results[30:])
    ref_spec = new_store(tmp_path / "ref.db")
    LinkPipeline(RunnerConfig(work_dir=tmp_path / "ref-work"), RULES.job_args(store=ref_spec, batch_size=50,
                 lru_size=1000)).process_many(ref_segs, name="ref")  # fmt: skip
    want = pending(tmp_path / "ref.db")
    assert want and not any("only-from-bomb" in u for u in want)

    db = tmp_path / "svc.db"
    spec = new_store(db)
    published: list[LinksReport] = []
    svc = LinkJobsService(segments=str(root), store=spec, runner=RunnerConfig(runner=runner, work_dir=tmp_path / "work"),
                          publish=published.append, max_segments=8, batch_size=50, lru_size=1000, poll_s=0.05,
                          sleep=lambda _s: None, parse_cpu_limit_s=CPU_LIMIT_S)  # fmt: skip
    summary = svc.run(stop=lambda: (not Segments(str(root)).closed() and svc._next is None and svc.rounds > 0)
                      or svc.failures > 4)  # fmt: skip

    assert summary["failures"] == 2 and summary["quarantined"] == 1, summary  # two deaths, then set aside
    assert summary["rounds"] >= 1
    listed = [json.loads(line) for line in (tmp_path / "work" / "guard" / QUARANTINE_FILE).read_text().splitlines()]
    assert [item["url"] for item in listed] == [bomb.url]
    assert sorted(k for r in published for k in r.segments) == ["node0/svc-000000001-1.jsonl",
                                                               "node1/svc-000000002-1.jsonl"]  # fmt: skip
    assert pending(db) == want  # every other page's links, each in-link once, nothing of the bomb's
    with SqliteStore(db) as store:
        why = store.get_meta(META_PREFIX + bomb.url)
    assert why is not None and why.startswith("parse_failed: an extract task died parsing it")
    assert not list((tmp_path / "work" / "guard" / GUARD_DIR).glob("*.marker"))  # tasks that finished left no marker


def test_with_re_crawling_the_update_job_does_not_parse_a_quarantined_page(tmp_path: Path) -> None:
    """With re-crawling on and a text simhash asked for (``recrawl.simhash_bits``), the crawl-db update
    job computes each fetched page's simhash, which parses it. A page the extract job's tasks died on is
    compared by its exact digest only (``--quarantine`` reaches the update job too), as the embedded crawl
    does: parsing it there would kill, or stall, the update job as it did the extract tasks. Judged in
    the store: the page's re-crawl state has a digest and no simhash; the other pages have both."""
    results = list(make_results(20, hosts=2, links=6, page_bytes=3000, seed=9, error_rate=0.0))
    bomb = bomb_page(results[0].url.split("/")[2])
    root = tmp_path / "segs"
    write_segment(root / "node0" / "svc-000000001-1.jsonl", [*results[:10], bomb, *results[10:]])
    db = tmp_path / "svc.db"
    spec = new_store(db)
    with SqliteStore(db) as store:  # the fetched URLs are in the crawl db, as the dispatcher leased them
        store.put_meta(RECRAWL_META, json.dumps({"enabled": True, "simhash_bits": 3}))
        store.add_urls([UrlRecord(r.url, r.url_id, host_of(r.url), r.depth) for r in [*results, bomb]])
    svc = LinkJobsService(segments=str(root), store=spec, runner=RunnerConfig(runner="inline", work_dir=tmp_path / "work"),
                          publish=lambda _r: None, max_segments=8, batch_size=50, lru_size=1000, poll_s=0.05,
                          sleep=lambda _s: None, parse_cpu_limit_s=CPU_LIMIT_S)  # fmt: skip
    summary = svc.run(stop=lambda: (not Segments(str(root)).closed() and svc._next is None and svc.rounds > 0)
                      or svc.failures > 4)  # fmt: skip
    assert summary["quarantined"] == 1 and summary["rounds"] >= 1, summary
    with SqliteStore(db) as store:
        kept = store.get_revisit(bomb.url)
        others = [store.get_revisit(r.url) for r in results if r.ok and "text/html" in r.content_type]
    assert kept is not None and kept.digest and kept.simhash == 0, kept
    assert others and all(r is not None and r.digest and r.simhash != 0 for r in others)
