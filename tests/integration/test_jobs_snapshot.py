"""S5's cache carried across MapReduce rounds: the second round answers repeats locally, same result,
whether the merge borrows the driver's cache in its process (inline) or gets a snapshot file (task
processes of the local runner), and a new driver starts from the file the last one left."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from jobs import snapshot
from jobs.runner import JobArgs, LinkPipeline
from jobs.runnerconfig import RunnerConfig
from jobs.synth import make_results, write_segment
from pipeline.storage.sqlite import SqliteStore

pytestmark = pytest.mark.integration


def two_rounds(tmp_path: Path, *, carry: bool, runner: RunnerConfig | None = None) -> list[dict]:  # type: ignore[type-arg]
    segs = [tmp_path / f"segment-{i:05d}.jsonl" for i in range(2)]
    for i, seg in enumerate(segs):  # same hosts, different pages: many shared link targets
        write_segment(seg, make_results(40, hosts=2, page_bytes=2000, seed=10 + i))
    base = tmp_path / ("carry" if carry else "plain")
    pipeline = LinkPipeline(replace(runner or RunnerConfig(runner="inline"), work_dir=base / "work"),
                            JobArgs(store=f"sqlite:{base / 'crawl.db'}", allowed_domains=("crawl.test",)),
                            carry_cache=carry)  # fmt: skip
    try:
        return [{"new": sorted(r["url"] for r in res.new_pending), "dedup": res.counters["dedup"]}
                for res in (pipeline.process(seg) for seg in segs)]  # fmt: skip
    finally:
        pipeline.close()


def test_carried_cache_saves_lookups_and_changes_nothing(tmp_path: Path) -> None:
    plain = two_rounds(tmp_path, carry=False)
    carried = two_rounds(tmp_path, carry=True)
    assert [r["new"] for r in carried] == [r["new"] for r in plain]
    second = carried[1]["dedup"]
    assert second["carried"] > 0 and second["local_hits"] > 0 and "preloaded" not in second
    assert second["remote_lookups"] < plain[1]["dedup"]["remote_lookups"]


def test_merges_in_task_processes_get_the_cache_as_a_file(tmp_path: Path) -> None:
    tasks = RunnerConfig(runner="local", map_tasks=2, split_bytes=1)  # two merge tasks: not inline
    plain = two_rounds(tmp_path, carry=False, runner=tasks)
    carried = two_rounds(tmp_path, carry=True, runner=tasks)
    assert [r["new"] for r in carried] == [r["new"] for r in plain]
    second = carried[1]["dedup"]
    assert second["preloaded"] > 0 and "carried" not in second
    assert second["remote_lookups"] < plain[1]["dedup"]["remote_lookups"]


def test_a_new_driver_starts_from_the_cache_the_last_one_left(tmp_path: Path) -> None:
    first = two_rounds(tmp_path, carry=True)
    seg = tmp_path / "segment-00001.jsonl"
    db = tmp_path / "carry" / "crawl.db"
    pipeline = LinkPipeline(RunnerConfig(runner="inline", work_dir=tmp_path / "carry" / "work"),
                            JobArgs(store=f"sqlite:{db}", allowed_domains=("crawl.test",)))
    res = pipeline.process(seg)  # the second segment again: every target is known
    assert res.counters["dedup"]["carried"] >= first[1]["dedup"]["carried"]
    assert res.counters["dedup"].get("remote_lookups", 0) == 0 and not res.new_pending


def test_snapshot_of_another_store_is_ignored(tmp_path: Path) -> None:
    two_rounds(tmp_path, carry=True)
    db = tmp_path / "carry" / "crawl.db"
    with SqliteStore(db) as store:
        store.put_meta(snapshot.TOKEN_KEY, "someone-else")
    seg = tmp_path / "segment-00001.jsonl"
    pipeline = LinkPipeline(RunnerConfig(runner="inline", work_dir=tmp_path / "carry" / "work"),
                            JobArgs(store=f"sqlite:{db}", allowed_domains=("crawl.test",)))
    res = pipeline.process(seg)  # the file was made for the store's old token: the cache starts empty
    dedup = res.counters["dedup"]
    assert dedup.get("carried", 0) == 0 and dedup.get("local_hits", 0) == 0 and dedup["remote_lookups"] > 0
