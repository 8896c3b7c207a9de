"""Fault trials on the embedded default (pipeline.harness.faults.embedded): the crawler SIGKILLed and resumed,
SIGSTOPped and continued, its parse process killed or stopped, one of its fetch processes (``fetch.processes
= 2``) killed or stopped, and its DNS server (a private unbound) killed and restarted, each at a seeded
point of a crawl of the testbed. Judged from outside (tests/faults/verdict.py): the testbed's access log,
the truth, the store and the strike.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.embedded import crawler_trial, fetcher_trial, parser_trial, unbound_trial
from tests.faults.verdict import check, check_fetches_nothing
from tests.services import need_unbound

pytestmark = pytest.mark.faults


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_crawler_sigkill_then_resume(
    fault_bed: Bed, tmp_path: Path, record: Callable[..., Any], seed: int
) -> None:
    rec = record(crawler_trial(fault_bed, tmp_path, TrialPlan.seeded("crawler", "kill", seed)))
    check(rec)
    assert rec["summary"]["results_dropped"] == 0


def test_crawler_sigstop_then_sigcont(fault_bed: Bed, tmp_path: Path, record: Callable[..., Any]) -> None:
    rec = record(crawler_trial(fault_bed, tmp_path, TrialPlan.seeded("crawler", "stop", 1, down=(1.0, 3.0))))
    check(rec)
    assert rec["repeats"] == 0  # nothing restarted, so nothing may be asked twice


@pytest.mark.parametrize(("action", "seed"), [("kill", 1), ("kill", 2), ("stop", 1)])
def test_parse_process_killed_or_stopped(
    fault_bed: Bed, tmp_path: Path, record: Callable[..., Any], action: str, seed: int
) -> None:
    rec = record(parser_trial(fault_bed, tmp_path, TrialPlan.seeded("parser", action, seed)))
    check_fetches_nothing(rec)  # the crawler never stopped: nothing may be asked twice
    assert rec["summary"]["results_dropped"] == 0


@pytest.mark.parametrize(("action", "seed"), [("kill", 1), ("kill", 2), ("stop", 1)])
def test_fetch_process_killed_or_stopped(
    fault_bed: Bed, tmp_path: Path, record: Callable[..., Any], action: str, seed: int
) -> None:
    """Only requests of the struck process itself (by its pid) in flight at the kill, or of its last
    ``RECENT_S``, may be asked again, and by another process; a stopped one fetches nothing stale."""
    rec = record(fetcher_trial(fault_bed, tmp_path, TrialPlan.seeded("fetcher", action, seed)))
    check(rec)
    assert rec["summary"]["results_dropped"] == 0
    if action == "stop":
        assert rec["repeats"] == 0  # a stopped fetch process holds its batches: nothing may be asked twice


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_unbound_sigkill_then_restart(
    fault_bed: Bed, tmp_path: Path, record: Callable[..., Any], seed: int
) -> None:
    need_unbound()
    rec = record(unbound_trial(fault_bed, tmp_path, TrialPlan.seeded("unbound", "kill", seed)))
    check_fetches_nothing(rec)
