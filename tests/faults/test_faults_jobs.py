"""Fault trials of the MapReduce job driver (pipeline.harness.faults.jobs_trial): ``crawlfleet jobs run`` over
the segments of a real crawl, SIGKILLed at a seeded point (possibly inside a merge) and run again.
The crawl db must end as it does without a fault: no URL lost or added, no in-link counted twice.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.jobs_trial import jobs_trial, make_segments, reference

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def segments(fault_bed: Bed, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    work = tmp_path_factory.mktemp("jobs-input")
    segs = make_segments(fault_bed, work, pieces=2)
    return segs, reference(fault_bed, segs, work / "ref")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_jobs_driver_sigkill_then_rerun(fault_bed: Bed, segments: tuple[Path, dict[str, int]], tmp_path: Path,
                                        record: Callable[..., Any], seed: int) -> None:  # fmt: skip
    segs, ref = segments
    rec = record(jobs_trial(fault_bed, segs, ref, tmp_path, TrialPlan.seeded("jobs", "kill", seed)))
    assert rec["lost"] == 0 and rec["extra_urls"] == 0, (rec["lost_sample"], rec["extra_urls"])
    assert rec["inlinks_doubled"] == 0, (rec["inlinks_ref"], rec["inlinks_trial"], rec["doubled_sample"])
