"""Fault trials on the fleet (pipeline.harness.faults.fleet_trials): a fetch worker and the dispatcher, SIGKILLed
and restarted or SIGSTOPped and continued at seeded points of a crawl; real RabbitMQ (a private vhost
on the shared broker), real Celery workers, the real dispatcher process.

Judged from outside (tests/faults/verdict.py): the testbed's access log, the truth, the store and the
strike. A repeat is excused only if the struck worker itself (by the pid in its User-Agent) had the
request in flight at the fault or made it within ``RECENT_S`` before; the dispatcher and the link jobs
fetch nothing, so their trials excuse no repeat at all, and a stopped worker, once continued, may fetch
nothing already fetched.

A stopped worker is declared dead and its batches re-issued; when it resumes it starts none of their
remaining URLs (pipeline/transport/node/lease.py). A stopped dispatcher counts the stop as paused time
(pipeline/transport/wire/session.py) and expires nothing.

A worker trial strikes a node that has held a batch for three seconds, at the product's default pace:
a node that kept a whole batch's results until the batch ended would have completed requests of the
seconds before the fault fetched again, and fail. (A node stores and reports a running batch's results
in chunks: a finished result waits at most ``fleet.progress_s``, 0.5 s, for its chunk's write.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.fleet_trials import (
    PACED,
    run_fleet_trial,
    strike_dispatcher,
    strike_links,
    strike_worker,
)
from pipeline.harness.faults.services import broker_vhost
from tests.faults.verdict import check, check_fetches_nothing

pytestmark = [pytest.mark.faults, pytest.mark.integration]


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with broker_vhost() as url:
        yield url


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_worker_sigkill_then_restart(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any], seed: int
) -> None:
    plan = TrialPlan.seeded("worker", "kill", seed)
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_worker, rig_kw=PACED))
    check(rec)


def test_worker_sigstop_past_two_heartbeats(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any]
) -> None:
    """Stopped past two heartbeat periods, the node is declared dead and its batches re-issued: only its
    requests of the last second before the stop may be fetched again, and once continued it must fetch
    nothing already fetched (``woken_repeats``)."""
    plan = TrialPlan.seeded("worker", "stop", 1, down=(1.5, 3.0))  # heartbeat 0.5 s: dead after 1 s
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_worker, rig_kw=PACED))
    check(rec)


def test_a_node_that_holds_its_batch_to_the_end_fails_the_verdict(fault_bed: Bed, vhost: str, tmp_path: Path) -> None:
    """The worker kill trial can fail: with ``fleet.progress_s = 0`` a node reports a batch's results only
    at its end, and the judge finds its completed requests of the seconds before the kill fetched again
    (measured 2026-11-28 on fc3183f: 65 of 92 repeats unexcused; with progress_s = 1, 0 of 21-26)."""
    plan = TrialPlan.seeded("worker", "kill", 2)
    rec = run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_worker,
                          rig_kw={**PACED, "extra_env": {"CRAWLFLEET_FLEET_PROGRESS_S": "0"}})  # fmt: skip
    assert rec["lost"] == 0, rec["lost_sample"]
    assert rec["repeats_unexcused"] > 0, rec  # not recorded: this crawl runs a setting the product does not


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dispatcher_sigkill_then_resume(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any], seed: int
) -> None:
    plan = TrialPlan.seeded("dispatcher", "kill", seed)
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_dispatcher))
    check_fetches_nothing(rec)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_link_jobs_sigkill_mid_round_then_restart(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any], seed: int
) -> None:
    """Killed at a seeded point of the crawl (so at varying points of a round), the link jobs lose no
    URL and make no page be fetched twice: they fetch nothing, so no repeat is excused."""
    plan = TrialPlan.seeded("links", "kill", seed)
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_links))
    check_fetches_nothing(rec)


def test_dispatcher_sigstop_then_sigcont(
    fault_bed: Bed, vhost: str, tmp_path: Path, record: Callable[..., Any]
) -> None:
    plan = TrialPlan.seeded("dispatcher", "stop", 1, down=(1.0, 3.0))
    rec = record(run_fleet_trial(fault_bed, vhost, tmp_path, plan, strike=strike_dispatcher))
    check_fetches_nothing(rec)
