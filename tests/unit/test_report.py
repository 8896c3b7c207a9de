"""The report: streaming readers, aggregation, plots (valid PNGs), HTML and JSON from a synthetic crawl dir."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from fetchers.records import FetchResult, Timings
from pipeline.cli import main as cli_main
from pipeline.report import build_report
from pipeline.report.aggregate import LogHistogram, quota_line, rate_stats, timeline_from_rows
from pipeline.report.build import load_stats
from pipeline.report.plots import PLOTS
from pipeline.report.sample import SampleSpec, write_sample_crawl

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("report")
    crawl = write_sample_crawl(base / "crawl", SampleSpec(seconds=20, pages_per_s=30))
    out = base / "out"
    build_report(crawl, out)
    return crawl, out


def assert_valid_png(path: Path) -> None:
    assert path.is_file(), path
    assert path.read_bytes()[:8] == PNG_MAGIC
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        assert im.format == "PNG" and im.size[0] >= 600 and im.size[1] >= 200
        # not a blank canvas: a real plot has many distinct colours
        assert len(im.convert("RGB").getcolors(maxcolors=1_000_000) or []) > 5


def test_every_plot_is_a_valid_png_and_the_html_references_it(sample_report: tuple[Path, Path]) -> None:
    _, out = sample_report
    page = (out / "index.html").read_text()
    for name, *_ in PLOTS:
        assert_valid_png(out / name)
        assert f"src='{name}'" in page
    assert "<script" not in page and "http://" not in page.split("</style>")[0]


def test_report_json_holds_the_same_stats(sample_report: tuple[Path, Path]) -> None:
    crawl, out = sample_report
    data = json.loads((out / "report.json").read_text())
    summary = json.loads((crawl / "summary.json").read_text())
    assert data["totals"]["pages"] == summary["pages_fetched"]
    assert data["totals"]["failed"] == summary["pages_failed"]
    assert data["totals"]["bytes"] == summary["bytes"]
    assert data["status_mix"] == summary["status_mix"]
    assert data["errors_by_class"] == summary["errors_by_class"]
    assert data["depth"] == summary["depth"]
    assert data["quota_per_s"] == 45.0
    assert data["rate"]["source"] == "stats.jsonl"
    assert len(data["timeline"]["t"]) == 20
    rate = data["rate"]["pages_per_s"]
    assert 25 < rate["mean"] < 35 and rate["cv"] < 0.2  # the synthetic crawl is flat after ramp-up
    assert set(data["fetchers"]) == {"f1", "f2", "f3"}
    # S3: the fastest fetcher gets the largest batches
    assert data["fetchers"]["f1"]["mean_batch"] > data["fetchers"]["f3"]["mean_batch"]
    assert data["latency"]["phases"]["ttfb"]["n"] == summary["pages_fetched"]
    assert 0.5 < data["dns"]["hit_rate"] <= 1.0
    assert data["bad_lines"] == {}


def test_torn_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    crawl = write_sample_crawl(tmp_path / "crawl", SampleSpec(seconds=5, pages_per_s=10))
    with (crawl / "stats.jsonl").open("a") as fh:
        fh.write('{"t": 1790000006, "pag')  # crash mid-write
    seg = sorted((crawl / "segments").glob("segment-*.jsonl"))[-1]
    with seg.open("a") as fh:
        fh.write('[1, 2]\n{"no_url": true}\n')
    stats = load_stats(crawl)
    assert stats.bad_lines == {"stats.jsonl": 1, seg.name: 2}
    assert len(stats.timeline.t) == 5


def test_empty_and_segment_only_crawl_dirs_still_give_every_plot(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    res = build_report(empty, tmp_path / "out-empty")
    for path in res.plots:
        assert_valid_png(path)
    assert json.loads(res.json.read_text())["rate"]["source"] == "none"
    # Only result segments (no stats.jsonl): the timeline comes from fetched_at.
    crawl = write_sample_crawl(tmp_path / "crawl", SampleSpec(seconds=6, pages_per_s=10))
    (crawl / "stats.jsonl").unlink()
    (crawl / "summary.json").unlink()
    data = json.loads(build_report(crawl, tmp_path / "out-seg").json.read_text())
    assert data["rate"]["source"] == "segments"
    assert sum(data["timeline"]["pages_per_s"]) == data["totals"]["pages"]
    assert data["quota_per_s"] is None


def test_crawled_names_are_escaped_in_the_page(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    (crawl / "segments").mkdir(parents=True)
    hostile = FetchResult(url="http://x.test/<script>alert(1)</script>", url_id=1, depth=0,
                          error_class="<img src=x onerror=alert(1)>", fetched_at=1.5)
    with (crawl / "segments" / "segment-00000.jsonl").open("w") as fh:
        fh.write(json.dumps(hostile.to_json()) + "\n")
    page = build_report(crawl, tmp_path / "out").html.read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_cli_report_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crawl = write_sample_crawl(tmp_path / "crawl", SampleSpec(seconds=4, pages_per_s=5))
    assert cli_main(["report", str(crawl), "--out", str(tmp_path / "r"), "--embed"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "r" / "index.html")
    page = (tmp_path / "r" / "index.html").read_text()
    assert page.count("src='data:image/png;base64,") == len(PLOTS)
    assert cli_main(["report", str(tmp_path / "missing"), "--out", str(tmp_path / "r2")]) == 2


def test_log_histogram_percentiles() -> None:
    h = LogHistogram()
    assert h.percentile(0.5) is None
    for _ in range(90):
        h.add(0.010)
    for _ in range(10):
        h.add(1.0)
    h.add(0.0)
    assert h.n == 100 and h.zeros == 1
    assert 0.008 < h.percentile(0.5) <= 0.0101  # type: ignore[operator]
    assert 0.79 < h.percentile(0.99) <= 1.0001  # type: ignore[operator]


def test_rate_stats_trims_ramp_and_measures_flatness() -> None:
    flat = [1.0, 50.0] + [100.0] * 16 + [50.0, 1.0]
    st = rate_stats(flat)
    assert st["mean"] == 100.0 and st["cv"] == 0.0 and st["n"] == 16
    assert rate_stats([])["mean"] is None
    assert rate_stats([0.0, 0.0])["cv"] is None


def test_quota_line_and_timeline_from_rows() -> None:
    assert quota_line({"quota_per_s": 40}) == 40.0
    assert quota_line({"quota_per_s": {"a": 10, "b": 5.5}}) == 15.5
    assert quota_line({"quota_per_s": None}) is None and quota_line({}) is None
    assert quota_line({"quota_per_s": True}) is None
    rows: list[dict[str, Any]] = [
        {"t": 101.0, "dt": 1.0, "pages": 10, "bytes": 2048, "failed": 1, "queue": 5, "dns_hit_rate": 0.5,
         "dns": {"hits": 1, "misses": 1}, "fetchers": {"f1": {"n_i": 64, "t_i": 0.02}}},
        {"t": 103.0, "dt": 2.0, "pages": 10, "bytes": 0},
        {"garbage": True},
    ]
    tl = timeline_from_rows(rows)
    assert tl.t == [1.0, 3.0]
    assert tl.pages_per_s == [10.0, 5.0] and tl.errors_per_s == [1.0, 0.0]
    assert tl.queue == [5, None] and tl.dns_hit_rate == [0.5, None] and tl.dns_hit_rate_cum == [0.5, None]
    assert tl.fetcher_n == {"f1": [(1.0, 64.0)]}


def test_segments_stream_without_decoding_bodies(tmp_path: Path) -> None:
    """A body that is not valid zlib must not matter: the report never decodes body_z."""
    crawl = tmp_path / "crawl"
    (crawl / "segments").mkdir(parents=True)
    rec = FetchResult(url="http://a.test/", url_id=1, depth=2, status=200, wire_bytes=10, fetched_at=5.0,
                      timings=Timings(0, 0, 0.01, 0.02)).to_json()
    rec["body_z"] = "not-base64-zlib!!"
    (crawl / "segments" / "segment-00000.jsonl").write_text(json.dumps(rec) + "\n")
    stats = load_stats(crawl)
    assert stats.segments.pages == 1 and stats.segments.depth == {2: 1}
