"""The link jobs give identical output on inline, local, Spark (local[2]) and Hadoop (local mode) runners.

Each runner runs the whole loop on the same small segment: extract -> update a fresh SQLite crawl
db. Spark and Hadoop start a JVM per job, so the segment is small and each runner runs once
(module-scoped results).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobs.jobrun import run_job
from jobs.mr_host_stats import MRHostStats
from jobs.runner import JobArgs, LinkPipeline, RoundResult
from jobs.runnerconfig import RunnerConfig
from pipeline.storage.base import UrlState
from pipeline.storage.sqlite import SqliteStore

pytestmark = pytest.mark.integration

RUNNERS = ("inline", "local", "spark", "hadoop")


def canonical(records: list[Any]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def run_round(runner: str, segment: Path, base: Path) -> tuple[RoundResult, Path]:
    db = base / f"{runner}.db"
    cfg = RunnerConfig(runner=runner, work_dir=base / f"work-{runner}")
    args = JobArgs(store=f"sqlite:{db}", allowed_domains=("crawl.test",), max_depth=4, batch_size=50)
    return LinkPipeline(cfg, args).process(segment), db


@pytest.fixture(scope="module")
def reference(jobs_segment: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[RoundResult, Path]:
    return run_round("inline", jobs_segment, tmp_path_factory.mktemp("jobs-inline"))


def test_inline_round_closes_the_loop(reference: tuple[RoundResult, Path]) -> None:
    result, db = reference
    assert result.candidates > 50
    assert len(result.new_pending) == result.candidates  # fresh store: every candidate is new
    with SqliteStore(db) as store:
        assert store.counts()["pending"] == result.candidates
        some = result.new_pending[0]
        rec = store.get_url(some["url"])
        assert rec is not None and rec.state == UrlState.PENDING and rec.depth == some["depth"]
    assert result.counters["dedup"]["round_trips"] >= 2  # batches of 50, one round trip each


@pytest.mark.parametrize("runner", ["local", "spark", "hadoop"])
def test_runner_output_identical_to_inline(
    runner: str,
    reference: tuple[RoundResult, Path],
    jobs_segment: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if runner == "spark":
        request.getfixturevalue("spark_ready")
    if runner == "hadoop":
        request.getfixturevalue("hadoop_ready")
        # Hadoop's local mode, also when the YARN daemons run (tests/integration/test_svc_hadoop.py runs there).
        monkeypatch.setenv("CRAWLFLEET_CLUSTER_HADOOP_MODE", "local")
    ref, ref_db = reference
    result, db = run_round(runner, jobs_segment, tmp_path)
    assert result.candidates == ref.candidates
    assert canonical(result.new_pending) == canonical(ref.new_pending)
    assert result.counters["links"] == ref.counters["links"]
    with SqliteStore(db) as got, SqliteStore(ref_db) as want:
        assert got.counts() == want.counts()
        for item in ref.new_pending[:20]:
            a, b = got.get_url(item["url"]), want.get_url(item["url"])
            assert a is not None and b is not None
            assert (a.depth, a.inlinks, a.discovered_from) == (b.depth, b.inlinks, b.discovered_from)


def test_second_round_finds_nothing_new_and_raises_inlinks(jobs_segment: Path, tmp_path: Path) -> None:
    first, db = run_round("inline", jobs_segment, tmp_path)
    url = first.new_pending[0]["url"]
    with SqliteStore(db) as store:
        before = store.get_url(url).inlinks  # type: ignore[union-attr]
    again, _ = run_round("inline", jobs_segment, tmp_path)
    assert again.new_pending == []
    with SqliteStore(db) as store:
        assert store.get_url(url).inlinks > before  # type: ignore[union-attr]


def test_without_inlink_counting_a_second_round_leaves_known_counts(
    jobs_segment: Path, tmp_path: Path
) -> None:
    """``dispatch.priority = "depth"`` (CrawlLinkRules.count_inlinks False -> ``--no-inlinks``): known URLs are
    only looked up, as the embedded crawl does then; new URLs still start with their round's count."""
    db = tmp_path / "depth.db"
    cfg = RunnerConfig(runner="inline", work_dir=tmp_path / "work")
    args = JobArgs(store=f"sqlite:{db}", allowed_domains=("crawl.test",), max_depth=4, batch_size=50,
                   count_inlinks=False)  # fmt: skip
    first = LinkPipeline(cfg, args).process(jobs_segment)
    assert first.new_pending
    with SqliteStore(db) as store:
        before = {r["url"]: store.get_url(r["url"]).inlinks for r in first.new_pending}  # type: ignore[union-attr]
    assert min(before.values()) >= 1
    again = LinkPipeline(cfg, args).process(jobs_segment)
    assert again.new_pending == [] and again.counters["dedup"]["inlink_updates"] == 0
    with SqliteStore(db) as store:
        assert {u: store.get_url(u).inlinks for u in before} == before  # type: ignore[union-attr]


def test_host_stats_local_matches_inline(jobs_segment: Path, tmp_path: Path) -> None:
    outs = [run_job(MRHostStats, [jobs_segment], [], RunnerConfig(runner=r, work_dir=tmp_path / r)).records
            for r in ("inline", "local")]
    assert canonical(outs[0]) == canonical(outs[1])
    assert sum(r["pages"] for r in outs[0]) == 60
    assert all(r["errors"] <= r["pages"] for r in outs[0])
