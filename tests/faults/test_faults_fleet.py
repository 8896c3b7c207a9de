"""Fault trials on the fleet (pipeline.harness.faults.fleet_trials): a fetch worker and the dispatcher, SIGKILLed
and restarted or SIGSTOPped and continued at seeded points of a crawl; real RabbitMQ (a private vhost
on the shared broker), real Celery workers, the real dispatcher process.

Every trial must lose nothing and fetch nothing twice. The only repeats allowed are requests that were
in flight on the struck process itself (counted apart in RELIABILITY.md: after a SIGKILL nobody can
know whether they were served): for a worker, URLs of the batches it held that the dispatcher expired
after the fault while still unanswered (pipeline.harness.faults.fleet_trials.worker_in_flight); the
dispatcher and the link jobs fetch nothing, so their trials excuse no repeat at all. An expired batch
excuses nothing by itself: a URL answered before its batch expired and fetched again is a duplicate
(``duplicated_causes`` names it ``expired_answered``, and the trial fails).

A stopped worker is declared dead and its batches re-issued; when it resumes it starts none of their
remaining URLs (pipeline/transport/node/lease.py). A stopped dispatcher counts the stop as paused time
(pipeline/transport/wire/session.py) and expires nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.fleet_trials import (
    run_fleet_trial,
    strike_dispatcher,
    strike_links,
    strike_worker,
)
from pipeline.harness.faults.services import broker_vhost

pytestmark = [pytest.mark.faults, pytest.mark.integration]


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with broker_vhost() as url:
        yield url


def check(rec: dict[str, Any]) -> None:
    """0 lost and 0 unexcused duplicates; known causes are reported, never excused."""
    assert rec["lost"] == 0, rec["lost_sample"]
    assert rec["stored_pages"] == rec["truth_pages"]
    assert rec["duplicated"] == 0, (rec["duplicated_causes"], rec["duplicated_sample"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_worker_sigkill_then_restart(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any], seed: int
) -> None:
    plan = TrialPlan.seeded("worker", "kill", seed)
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_worker))
    check(rec)


def test_worker_sigstop_past_two_heartbeats(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any]
) -> None:
    plan = TrialPlan.seeded("worker", "stop", 1, down=(1.5, 3.0))  # heartbeat 0.5 s: dead after 1 s
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_worker))
    check(rec)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dispatcher_sigkill_then_resume(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any], seed: int
) -> None:
    plan = TrialPlan.seeded("dispatcher", "kill", seed)
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_dispatcher))
    check(rec)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_link_jobs_sigkill_mid_round_then_restart(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any], seed: int
) -> None:
    """Killed at a seeded point of the crawl (so at varying points of a round), the link jobs lose no
    URL and make no page be fetched twice: they fetch nothing, so no repeat is excused."""
    plan = TrialPlan.seeded("links", "kill", seed)
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_links))
    check(rec)
    assert rec["in_flight_repeats"] == 0, rec


def test_dispatcher_sigstop_then_sigcont(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any]
) -> None:
    plan = TrialPlan.seeded("dispatcher", "stop", 1, down=(1.0, 3.0))
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_dispatcher))
    check(rec)
