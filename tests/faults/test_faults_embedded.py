"""Fault trials on the embedded default (pipeline.harness.faults.embedded): the crawler SIGKILLed and resumed,
SIGSTOPped and continued, its parse process killed or stopped, one of its fetch processes (``fetch.processes
= 2``) killed or stopped, and its DNS server (a private unbound) killed and restarted, each at a seeded
point of a crawl of the testbed. Judged from the testbed's access log and the store.

The promise: no page lost, no page fetched twice, except requests in flight at a SIGKILL (the server
may have answered them, the crawler cannot know), which are reported apart.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.dns.unbound import unbound_binary
from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.embedded import crawler_trial, fetcher_trial, parser_trial, unbound_trial

pytestmark = pytest.mark.faults


def check(rec: dict[str, Any]) -> None:
    assert rec["lost"] == 0, rec["lost_sample"]
    assert rec["duplicated"] == 0, rec["duplicated_sample"]
    assert rec["stored_pages"] == rec["truth_pages"]


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
    assert rec["in_flight_repeats"] == 0  # nothing restarted, so nothing may be asked twice


@pytest.mark.parametrize(("action", "seed"), [("kill", 1), ("kill", 2), ("stop", 1)])
def test_parse_process_killed_or_stopped(
    fault_bed: Bed, tmp_path: Path, record: Callable[..., Any], action: str, seed: int
) -> None:
    rec = record(parser_trial(fault_bed, tmp_path, TrialPlan.seeded("parser", action, seed)))
    check(rec)
    assert rec["in_flight_repeats"] == 0  # the crawler never stopped: nothing may be asked twice
    assert rec["summary"]["results_dropped"] == 0


@pytest.mark.parametrize(("action", "seed"), [("kill", 1), ("kill", 2), ("stop", 1)])
def test_fetch_process_killed_or_stopped(
    fault_bed: Bed, tmp_path: Path, record: Callable[..., Any], action: str, seed: int
) -> None:
    """Only the URLs the dead process held without a result may be asked twice (the crawler names them);
    a URL the other fetch process had in flight, or one whose result had reached the crawler, may not."""
    rec = record(fetcher_trial(fault_bed, tmp_path, TrialPlan.seeded("fetcher", action, seed)))
    check(rec)
    assert rec["summary"]["results_dropped"] == 0
    if action == "stop":
        assert rec["in_flight_repeats"] == 0  # nothing restarted, so nothing may be asked twice


@pytest.mark.skipif(
    unbound_binary() is None, reason="unbound is not installed (scripts/svc-unbound.sh install)"
)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_unbound_sigkill_then_restart(
    fault_bed: Bed, tmp_path: Path, record: Callable[..., Any], seed: int
) -> None:
    rec = record(unbound_trial(fault_bed, tmp_path, TrialPlan.seeded("unbound", "kill", seed)))
    check(rec)
