"""The link path's CPU split in ``crawlfleet bench fleet`` (pipeline/harness/bench/linkcpu.py): the children's
side is the service tree's CPU less the service process's own, per page, and against the bare functions."""

from __future__ import annotations

import math
from pathlib import Path

from pipeline.harness.bench.linkcpu import bare_links, split


def test_the_childrens_side_is_the_tree_less_the_service_and_is_set_against_the_bare_functions() -> None:
    got = split(30.0, 10.0, 50_000, 0.2)
    assert got["links_children_cpu_ms_per_page"] == 0.4 and got["links_service_cpu_ms_per_page"] == 0.2
    assert got["links_children_x_bare"] == 2.0


def test_no_samples_or_no_pages_give_no_figure_rather_than_a_wrong_one() -> None:
    for args in ((None, 1.0, 10, 0.2), (math.nan, 1.0, 10, 0.2), (3.0, math.nan, 10, 0.2), (3.0, 1.0, 0, 0.2)):
        assert set(split(*args).values()) == {None}
    assert split(3.0, 1.0, 10, None)["links_children_x_bare"] is None


def test_the_bare_loop_reads_and_decodes_segments_and_makes_the_extract_jobs_records(tmp_path: Path) -> None:
    """One bare loop for ``bench jobs`` and ``bench fleet``: from segment lines (a bad line skipped) to one
    record per target URL, the records the extract job writes over the same segments."""
    from jobs import logic
    from jobs.runner import extract_links
    from jobs.runnerconfig import RunnerConfig
    from jobs.synth import make_results, write_segment

    segs = [tmp_path / f"s{i}.jsonl" for i in range(2)]
    for i, seg in enumerate(segs):
        write_segment(seg, make_results(30, hosts=3, seed=i))
    with open(segs[1], "ab") as fh:
        fh.write(b"not json\n")
    rules = logic.LinkRules.build(allowed_domains=["crawl.test"], max_depth=10)
    pages, records = bare_links((seg.read_bytes().splitlines() for seg in segs), rules)
    job = extract_links(segs, ["--allowed-domain", "crawl.test", "--max-depth", "10"],
                        RunnerConfig(runner="inline", work_dir=tmp_path / "work"))  # fmt: skip
    assert pages == 60 and records == len(job) > 0
