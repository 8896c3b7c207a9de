"""Whole-segment mappers (#18 point 2): manifest lines, how segments are spread over map tasks, and the
extract job's output on manifests equal to its output on the same pages one line each (inline runner), and the
local runner's reduce tasks (one per core)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from jobs import logic
from jobs.jobrun import run_job
from jobs.localrunner import InlineRunner, LocalRunner, file_split_size, task_of_lines
from jobs.mr_extract_links import MRExtractLinks
from jobs.runner import extract_config, extract_links, manifests, merge_config, tasks_for
from jobs.runnerconfig import RunnerConfig
from jobs.synth import make_results, write_segment

ARGS = ["--allowed-domain", "crawl.test", "--max-depth", "4"]


def canonical(records: list[object]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def test_a_manifest_line_names_its_segment_and_nothing_else_does() -> None:
    line = logic.segment_manifest_line("/data/n1/s-1.jsonl")
    assert logic.segment_ref(line) == "/data/n1/s-1.jsonl"
    assert logic.segment_ref(line.encode()) == "/data/n1/s-1.jsonl"
    page = json.dumps(next(make_results(1, seed=1)).to_json())
    for other in (page, "", "garbage", '{"crawlfleet_segment": ', '{"crawlfleet_segment": 3}', "[1]"):
        assert logic.segment_ref(other) is None


def test_manifests_spread_segments_by_size_each_once(tmp_path: Path) -> None:
    segs = []
    for i, size in enumerate([900, 100, 500, 400, 50]):
        path = tmp_path / f"s{i}.jsonl"
        path.write_bytes(b"x" * size)
        segs.append(path)
    files = manifests(segs, tmp_path / "m", tasks=2)
    named = [[logic.segment_ref(ln) for ln in f.read_text().splitlines()] for f in files]
    assert sorted(p for part in named for p in part if p) == sorted(str(s.resolve()) for s in segs)
    loads = [sum(Path(p).stat().st_size for p in part if p) for part in named]
    assert (
        len(files) == 2 and max(loads) - min(loads) <= 100
    )  # 950 against 1000: largest first, lightest file
    assert len(manifests(segs[:1], tmp_path / "one", tasks=4)) == 1  # never an empty task


def test_a_small_round_on_the_local_runner_runs_one_task_per_step(tmp_path: Path) -> None:
    segs = []
    for i in range(3):
        path = tmp_path / f"s{i}.jsonl"
        path.write_bytes(b"x" * 400)
        segs.append(path)
    local = RunnerConfig(runner="local", work_dir=tmp_path / "w", map_tasks=4, split_bytes=1000)
    # 1,200 bytes: one task per 1,000 started, and mrjob's local runner told so (mappers and reducers).
    assert tasks_for(local, segs).map_tasks == 2
    assert tasks_for(local, segs[:2]).map_tasks == 1
    assert tasks_for(local, segs[:2]).args()[tasks_for(local, segs[:2]).args().index("--num-cores") + 1] == "1"
    assert tasks_for(RunnerConfig(runner="local", map_tasks=2, split_bytes=1), segs).map_tasks == 2  # at most
    assert tasks_for(RunnerConfig(runner="inline", map_tasks=4), segs).map_tasks == 1
    hadoop = RunnerConfig(runner="hadoop", map_tasks=4, split_bytes=1000)
    assert (tasks_for(hadoop, segs).map_tasks, tasks_for(hadoop, segs[:2]).map_tasks) == (2, 1)  # as local
    assert tasks_for(RunnerConfig(runner="spark", map_tasks=4), segs).map_tasks == 4  # Spark: as set
    # A one-task extract runs inline only in a worker process of its own (uber mode); else as configured.
    assert extract_config(local, segs[:2], in_worker=True).runner == "inline"
    assert extract_config(local, segs[:2], in_worker=False).runner == "local"
    assert extract_config(local, segs, in_worker=True).runner == "local"  # two tasks: task processes
    assert extract_config(RunnerConfig(runner="spark", map_tasks=1), segs, in_worker=True).runner == "spark"


def test_extract_on_segments_equals_extract_on_pages(tmp_path: Path) -> None:
    results = list(make_results(90, hosts=3, links=16, page_bytes=3000, seed=3))
    segs = []
    for i in range(3):
        path = tmp_path / f"segment-{i}.jsonl"
        write_segment(path, results[i * 30 : (i + 1) * 30])
        segs.append(path)
    with open(segs[1], "a", encoding="utf-8") as fh:
        fh.write('{"url": "http://torn')  # a node killed mid-line
    cfg = RunnerConfig(runner="inline", work_dir=tmp_path / "w")
    whole = extract_links(segs, ARGS, cfg)
    paged = run_job(MRExtractLinks, segs, ARGS, cfg)
    assert whole.records and canonical(whole.records) == canonical(paged.records)
    assert whole.counters["extract"] == {"results": 90, "bad_lines": 1, "segments": 3}
    assert whole.counters["links"] == paged.counters["links"]


@pytest.mark.parametrize("runner", ["inline", "local"])
def test_a_segment_that_cannot_be_read_fails_the_job(tmp_path: Path, runner: str) -> None:
    seg = tmp_path / "segment-0.jsonl"
    write_segment(seg, make_results(5, seed=1))
    listing = tmp_path / "manifest.txt"
    listing.write_text(logic.segment_manifest_line(str(tmp_path / "gone.jsonl")) + "\n")
    with pytest.raises(Exception):  # noqa: B017 - mrjob wraps the task's OSError; the round then runs again
        run_job(MRExtractLinks, [listing], ARGS, RunnerConfig(runner=runner, work_dir=tmp_path / "w"))


def test_reduce_input_goes_to_at_most_num_cores_tasks_a_key_never_split() -> None:
    lines = [f"k{i // 3:03d}\tv{i}\n".encode() for i in range(60)]  # 20 keys of 3 lines each
    size = sum(len(ln) for ln in lines)
    for parts in (1, 2, 3, 7):
        tasks = list(task_of_lines(lines, parts, size))
        assert [ln for _, ln in tasks] == lines and max(t for t, _ in tasks) == parts - 1
        owner: dict[bytes, set[int]] = {}
        for task, ln in tasks:
            owner.setdefault(ln.split(b"\t")[0], set()).add(task)
        assert all(len(t) == 1 for t in owner.values())
    one_key = [b"k\tv\n"] * 10
    assert {t for t, _ in task_of_lines(one_key, 4, 40)} == {0}  # one key: one task, whatever the cores


def test_the_local_runner_gives_the_inline_runners_links_reducing_only_what_several_tasks_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seg = tmp_path / "segment-0.jsonl"
    write_segment(seg, make_results(40, hosts=3, links=16, page_bytes=3000, seed=5))
    split = LocalRunner._split_reducer_input
    made: list[int] = []

    def counted(self: LocalRunner, step_num: int) -> int:
        made.append(split(self, step_num))
        return made[-1]

    monkeypatch.setattr(LocalRunner, "_split_reducer_input", counted)
    local = extract_links([seg], ARGS, RunnerConfig(runner="local", work_dir=tmp_path / "l"))
    inline = extract_links([seg], ARGS, RunnerConfig(runner="inline", work_dir=tmp_path / "i"))
    assert local.records and canonical(local.records) == canonical(inline.records)
    assert made == []  # one map task: its records are the output, no reduce step at all
    two = RunnerConfig(runner="local", work_dir=tmp_path / "2", split_bytes=1)  # one task a segment, up to 2
    seg2 = tmp_path / "segment-1.jsonl"
    write_segment(seg2, make_results(40, hosts=3, links=16, page_bytes=3000, seed=6))
    both = extract_links([seg, seg2], ARGS, two)
    alone = extract_links([seg, seg2], ARGS, RunnerConfig(runner="inline", work_dir=tmp_path / "i2"))
    assert made == [2] and canonical(both.records) == canonical(alone.records)  # 2 map tasks: reduced in 2


def test_a_one_task_merge_on_the_local_runner_runs_inline_a_larger_one_keeps_its_tasks(tmp_path: Path) -> None:
    local = RunnerConfig(runner="local", work_dir=tmp_path / "w", map_tasks=2)
    assert merge_config(replace(local, map_tasks=1)).runner == "inline"
    assert merge_config(local).runner == "local"  # two tasks: parallel store writers
    for other in ("spark", "hadoop", "inline"):
        assert merge_config(RunnerConfig(runner=other, map_tasks=1)).runner == other


def test_the_inline_runner_runs_one_map_task_per_input_file(tmp_path: Path) -> None:
    # mrjob's inline runner splits two files of many lines (here pages, one per line) into twice the
    # machine's cores of tasks, each with its own start-up (in the merge job a store connection and a
    # seen-cache); the link jobs' drivers write one file per task they want, so: one task per file.
    segs = [tmp_path / f"s{i}.jsonl" for i in range(2)]
    for i, seg in enumerate(segs):
        write_segment(seg, make_results(30, hosts=3, page_bytes=3000, seed=40 + i))
    paths = [str(s) for s in segs]
    job = MRExtractLinks(args=["-r", "inline", "--no-conf", "--local-tmp-dir", str(tmp_path / "w"), *ARGS, *paths])
    with InlineRunner(**job._runner_kwargs()) as runner:
        assert len(runner._split_mapper_input(paths, 0)) == 2
    assert file_split_size(paths) == max(s.stat().st_size for s in segs)
    out = run_job(MRExtractLinks, segs, ARGS, RunnerConfig(runner="inline", work_dir=tmp_path / "w2"))
    assert out.counters["extract"]["results"] == 60
    assert canonical(out.records) == canonical(extract_links(segs, ARGS, RunnerConfig(work_dir=tmp_path / "w3")).records)


def test_the_extract_output_is_kept_as_written_and_reads_as_records(tmp_path: Path) -> None:
    """The extract job's output lines go to the merge job undecoded; decoded on demand they are the
    records, and the URLs read off the lines are the records' URLs."""
    seg = tmp_path / "seg.jsonl"
    write_segment(seg, make_results(5, seed=1))
    out = extract_links([seg], ARGS, RunnerConfig(runner="inline", work_dir=tmp_path / "w"))
    assert out.lines and len(out) == len(out.lines)
    assert list(out.urls()) == [r["url"] for r in out.records]
    assert [json.loads(line) for line in out.json_lines()] == out.records


def test_a_link_record_url_is_read_off_its_line_and_an_odd_line_is_decoded() -> None:
    assert logic.url_of_line(b'{"url": "http://a.test/x", "depth": 1}') == "http://a.test/x"
    assert logic.url_of_line(b'{"url":"http://a.test/\\u00e9"}') == "http://a.test/\u00e9"
    assert logic.url_of_line(b'{"depth": 1, "url": "http://a.test/y"}') == "http://a.test/y"
