"""jobs.logic (the mapper/reducer bodies) and the pipelined driver, without any mrjob runner."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

from fetchers.records import FetchResult
from jobs import hoststats, logic
from jobs.runner import RoundResult
from jobs.runnerconfig import RunnerConfig
from jobs.synth import make_results, write_segment
from jobs.watch import closed_segments, run_pipelined, watch_segments
from pipeline.links.filtering import Candidate
from pipeline.urls import fingerprint

RULES = logic.LinkRules.build(allowed_domains=("a.test",), max_depth=3)


def result(body: str, *, url: str = "http://a.test/p", depth: int = 0, status: int = 200, **kw: object) -> FetchResult:
    return FetchResult(url=url, url_id=fingerprint(url), depth=depth, final_url=url, status=status,
                       content_type="text/html", body=body.encode(), **kw)  # type: ignore[arg-type]


def test_decode_result_round_trip_and_junk() -> None:
    r = result('<a href="/x">x</a>')
    assert logic.decode_result(json.dumps(r.to_json())) == r
    assert logic.decode_result("{not json") is None
    assert logic.decode_result('{"v": 1}') is None


def test_page_candidates_filters_and_skips_failures() -> None:
    html = '<a href="/x">x</a><a href="http://b.test/">out</a><a href="/x">dup</a><a href="/n" rel=nofollow>n</a>'
    assert [c.url for c in logic.page_candidates(result(html), RULES)] == ["http://a.test/x"]
    assert logic.page_candidates(result(html, status=404), RULES) == []
    assert logic.page_candidates(result(html, nofollow=True), RULES) == []
    assert logic.page_candidates(result(html, depth=3), RULES) == []


def _cand(depth: int, source: str, anchor: str, url: str = "http://a.test/t") -> Candidate:
    return Candidate(url, fingerprint(url), "a.test", depth, source, anchor)


CANDS = [_cand(2, "http://a.test/b", "B"), _cand(1, "http://a.test/z", "Z"), _cand(1, "http://a.test/a", "A"),
         _cand(3, "http://a.test/e", "A"), _cand(2, "http://a.test/c", ""), _cand(2, "http://a.test/d", "A")]
WANT = {"url": "http://a.test/t", "host": "a.test", "depth": 1, "source": "http://a.test/a",
        "inlinks": 6, "anchors": ["A", "B", "Z"]}


def test_merge_is_order_insensitive() -> None:
    values = [logic.link_value(c) for c in CANDS]
    assert logic.merge_link_values("http://a.test/t", values) == WANT
    rng = random.Random(3)
    for _ in range(20):
        rng.shuffle(values)
        assert logic.merge_link_values("http://a.test/t", values) == WANT


def test_combined_partials_merge_to_the_same_record_whatever_the_split() -> None:
    rng = random.Random(5)
    for _ in range(30):
        cands = list(CANDS)
        rng.shuffle(cands)
        cut = rng.randrange(len(cands) + 1)
        partials = []
        for part in (cands[:cut], cands[cut:]):  # two mappers
            comb = logic.LinkCombiner()
            for c in part:
                comb.add(c)
            partials += [v for _, v in comb.drain()]
        assert logic.merge_link_values("http://a.test/t", partials) == WANT


def test_combiner_asks_to_drain_when_full_and_is_empty_after() -> None:
    comb = logic.LinkCombiner(max_urls=2)
    assert comb.add(_cand(1, "http://a.test/", "", url="http://a.test/1")) is False
    assert comb.add(_cand(1, "http://a.test/", "", url="http://a.test/1")) is False  # same URL: no growth
    assert comb.add(_cand(1, "http://a.test/", "", url="http://a.test/2")) is True
    assert sorted(u for u, _ in comb.drain()) == ["http://a.test/1", "http://a.test/2"]
    assert len(comb) == 0 and list(comb.drain()) == []


def test_combiner_keeps_the_top_anchors_of_a_url_linked_under_many_texts() -> None:
    comb = logic.LinkCombiner()
    for i in range(200):
        comb.add(_cand(1, f"http://a.test/s{i}", "home" if i % 2 else f"text {i}"))
    ((_, partial),) = list(comb.drain())
    merged = logic.merge_link_values("http://a.test/t", [partial])
    assert merged["inlinks"] == 200 and merged["anchors"][0] == "home"


def test_merged_to_record_and_pending_json() -> None:
    rec = logic.merged_to_record({"url": "http://a.test/t", "depth": 2, "source": "http://a.test/", "inlinks": 4})
    assert (rec.url_id, rec.host, rec.depth, rec.inlinks) == (fingerprint("http://a.test/t"), "a.test", 2, 4)
    assert logic.pending_json(rec)["url_id"] == rec.url_id


def test_host_stats_sum() -> None:
    rs = [result("x", status=200), result("x", status=404), FetchResult("http://a.test/q", 1, 0, error_class="dns")]
    values = [hoststats.host_stat_value(r) for r in rs]
    assert {v[0] for v in values if v} == {"a.test"}
    total = hoststats.sum_host_values(v[1] for v in values if v)
    rec = hoststats.host_stats_record("a.test", total)
    assert (rec["pages"], rec["ok"], rec["errors"], rec["s4xx"]) == (3, 1, 2, 1)


def test_open_store_rejects_bad_specs() -> None:
    with pytest.raises(ValueError):
        logic.open_store("mysql:x")


def test_runner_config_args() -> None:
    assert RunnerConfig(runner="inline").args()[:3] == ["-r", "inline", "--no-conf"]
    with pytest.raises(ValueError):
        RunnerConfig(runner="nope").args()


def test_spark_args_start_a_lean_driver_jvm_on_loopback() -> None:
    """The driver JVM gets the start-up options (C1 only, serial GC) and binds to loopback only."""
    args = RunnerConfig(runner="spark").args()
    confs = [args[i + 1] for i, a in enumerate(args) if a == "-D"]
    assert "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" in confs
    assert {"spark.ui.enabled=false", "spark.driver.bindAddress=127.0.0.1"} <= set(confs)


def test_closed_segments_and_watch(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"segment-{i:05d}.jsonl").write_text("")
    assert [p.name for p in closed_segments(tmp_path, include_last=False)] == ["segment-00000.jsonl",
                                                                               "segment-00001.jsonl"]
    polls = iter([False, False, True])
    seen = [p.name for p in watch_segments(tmp_path, done=lambda: next(polls), sleep=lambda s: None)]
    assert seen == ["segment-00000.jsonl", "segment-00001.jsonl", "segment-00002.jsonl"]


def fake_round(seg: Path) -> RoundResult:
    time.sleep(0.05)
    return RoundResult(seg.name, 0, [], 0.0, 0.0, {})


def test_run_pipelined_overlaps_producer_and_processing(tmp_path: Path) -> None:
    """While segment N is processed, the producer is already writing segment N+1."""
    processing = threading.Event()
    produced_while_processing: list[bool] = []

    def process(seg: Path) -> RoundResult:
        processing.set()
        out = fake_round(seg)
        processing.clear()
        return out

    def producer():  # type: ignore[no-untyped-def]
        for i in range(4):
            path = tmp_path / f"segment-{i:05d}.jsonl"
            write_segment(path, make_results(3, hosts=1, page_bytes=500, seed=i))
            if i:
                time.sleep(0.02)
                produced_while_processing.append(processing.is_set())
            yield path

    names = [r.segment for r in run_pipelined(producer(), process)]
    assert names == [f"segment-{i:05d}.jsonl" for i in range(4)]
    assert any(produced_while_processing)


def test_run_pipelined_reraises_errors(tmp_path: Path) -> None:
    def boom(seg: Path) -> RoundResult:
        raise RuntimeError("job failed")

    with pytest.raises(RuntimeError, match="job failed"):
        list(run_pipelined([tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "d"], boom))


def test_snapshot_round_trip_and_merge(tmp_path: Path) -> None:
    from jobs import snapshot

    path = tmp_path / "seen.txt"
    snapshot.write(path, "tok", [3, 1, 2])
    assert snapshot.read(path) == ("tok", [3, 1, 2])
    assert snapshot.read(tmp_path / "missing.txt") == ("", [])
    (tmp_path / "bad.txt").write_text("no header\n1\n")
    assert snapshot.read(tmp_path / "bad.txt") == ("", [])
    carried = snapshot.Carried("tok", 3, saved=True)
    carried.add([1, 2, 3])
    carried.add([2, 4])  # a repeat moves to the newest end; the oldest beyond the limit go
    assert list(carried.ids) == [3, 2, 4] and not carried.saved
    none = snapshot.Carried("tok", 0)
    none.add([1, 2])
    assert list(none.ids) == []
