"""The fleet's re-crawl scheduling (#23): the crawl-db update job (mrjob, inline runner) gives the URLs a
fetch node recorded their next fetch, from the round's segments, when the store's meta says re-crawling
is on; with it off the job is as before."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fetchers.records import FetchResult
from jobs.runner import JobArgs, LinkPipeline
from jobs.runnerconfig import RunnerConfig
from pipeline.frontier.observation import content_digest
from pipeline.frontier.schedule import RECRAWL_META
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Outcome, UrlRecord, UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint

URL = "http://a.test/"
BODY = b'<html><body><a href="/next">n</a></body></html>'


def result(fetched_at: float, *, status: int = 200, body: bytes = BODY) -> FetchResult:
    return FetchResult(URL, fingerprint(URL), 0, final_url=URL, status=status, content_type="text/html",
                       body=body, body_bytes=len(body), headers={"etag": '"e1"'}, fetched_at=fetched_at)  # fmt: skip


def setup(tmp: Path, *, recrawl: bool) -> tuple[Path, Path]:
    db = tmp / "crawl.db"
    store = SqliteStore(db)
    store.add_urls([UrlRecord(URL, fingerprint(URL), "a.test", 0)])
    store.record_results([Outcome(URL, fingerprint(URL), UrlState.DONE, 200, 100.0)])  # as a node records it
    if recrawl:
        cfg = RecrawlSettings(
            enabled=True, initial_interval_s=60.0, min_interval_s=10.0, max_interval_s=600.0, policy="nutch"
        )
        store.put_meta(RECRAWL_META, json.dumps(dataclasses.asdict(cfg)))
    store.close()
    segment = tmp / "segment-00001.jsonl"
    lines = [
        json.dumps(result(100.0).to_json()),
        '{"torn": ',
        json.dumps(result(200.0, status=304, body=b"").to_json()),
    ]
    segment.write_text("\n".join(lines) + "\n")
    return db, segment


def run_round(tmp: Path, db: Path, segment: Path) -> None:
    cfg = RunnerConfig(runner="inline", work_dir=tmp / "work")
    LinkPipeline(cfg, JobArgs(store=f"sqlite:{db}"), carry_cache=False).process(segment)


def test_the_update_job_schedules_what_nodes_fetched(tmp_path: Path) -> None:
    db, segment = setup(tmp_path, recrawl=True)
    run_round(tmp_path, db, segment)
    store = SqliteStore(db)
    try:
        r = store.get_revisit(URL)
        # first the 200 (new: 60 s), then the 304 (unchanged: x 1.4), each from its own fetch time
        assert r is not None and r.fetches == 2 and r.interval == 84.0 and r.next_fetch == 284.0
        assert r.digest == content_digest(BODY) and r.etag == '"e1"'
        assert store.get_url("http://a.test/next") is not None  # the links still go in as before
        run_round(tmp_path, db, segment)  # a replayed round changes nothing
        assert store.get_revisit(URL) == r
        assert store.requeue_due(300.0, 10) == {"a.test": 1}
    finally:
        store.close()


def test_without_recrawl_settings_nothing_is_scheduled(tmp_path: Path) -> None:
    db, segment = setup(tmp_path, recrawl=False)
    run_round(tmp_path, db, segment)
    store = SqliteStore(db)
    try:
        assert store.get_revisit(URL) is None
        assert store.get_url("http://a.test/next") is not None
    finally:
        store.close()
