"""Fault trials on the services under the fleet: RabbitMQ (a private node, SIGKILLed and restarted or
SIGSTOPped) and the HBase Thrift server (a private one over the shared HBase, SIGKILLed and restarted,
with the crawl's store in HBase). Judged as every trial (tests/faults/verdict.py); neither the broker nor
the Thrift server fetches anything, so not one repeat is allowed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.fleet_trials import run_fleet_trial, strike_rabbit, strike_thrift
from pipeline.harness.faults.services import PrivateRabbit, PrivateThrift, broker_vhost
from pipeline.settings import StoreSettings
from tests.faults.verdict import check_fetches_nothing

pytestmark = [pytest.mark.faults, pytest.mark.integration]
FILE = "tests/faults/test_faults_services.py"


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRabbit]:
    node = PrivateRabbit(tmp_path_factory.mktemp("rabbit")).start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="module")
def thrift(hbase_thrift: tuple[str, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateThrift]:
    server = PrivateThrift(tmp_path_factory.mktemp("thrift")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def hbase_tables(hbase_thrift: tuple[str, int]) -> Iterator[str]:
    from tests.fixtures.hbase import drop_prefix

    prefix = f"flt{uuid.uuid4().hex[:8]}"
    yield prefix
    for i in range(4):
        drop_prefix(f"{prefix}{i}")


@pytest.mark.parametrize(("action", "seed"), [("kill", 1), ("kill", 2), ("stop", 1)])
def test_rabbitmq_fault(fault_bed: Bed, rabbit: PrivateRabbit, tmp_path: Path, record: Callable[..., Any],
                        action: str, seed: int) -> None:  # fmt: skip
    # A stop longer than two heartbeat periods (1 s here) is the stalled-broker case.
    plan = TrialPlan.seeded("rabbitmq", action, seed, down=(1.5, 3.0) if action == "stop" else (0.3, 2.0))
    rec = record(run_fleet_trial(fault_bed, rabbit.url, tmp_path, plan, strike=strike_rabbit(rabbit)))
    assert rec["lost"] == 0 and rec["robots_extra"] == 0, (rec["lost_sample"], rec["robots_sample"])
    # A stall pauses the dispatcher's liveness clock (was STALLED_BROKER_EXPIRES_ALL): nothing expires.
    check_fetches_nothing(rec)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_thrift_sigkill_then_restart(fault_bed: Bed, thrift: PrivateThrift, hbase_tables: str, tmp_path: Path,
                                     record: Callable[..., Any], seed: int) -> None:  # fmt: skip
    store = StoreSettings(kind="hbase", hbase_port=thrift.port, hbase_prefix=f"{hbase_tables}{seed - 1}")
    with broker_vhost() as url:
        plan = TrialPlan.seeded("thrift", "kill", seed)
        rec = record(run_fleet_trial(fault_bed, url, tmp_path, plan, strike=strike_thrift(thrift), store=store))
    check_fetches_nothing(rec)


def test_thrift_down_longer_than_the_batch_lease(fault_bed: Bed, thrift: PrivateThrift, hbase_tables: str,
                                                 tmp_path: Path, record: Callable[..., Any]) -> None:  # fmt: skip
    """The nodes store through an outage longer than the dispatcher's batch lease (the rig's 15 s): their
    heartbeats name the batches they still hold, so none is re-issued and fetched again elsewhere."""
    store = StoreSettings(kind="hbase", hbase_port=thrift.port, hbase_prefix=f"{hbase_tables}3")
    with broker_vhost() as url:
        plan = TrialPlan.seeded("thrift", "kill", 4, down=(18.0, 20.0))
        rec = record(run_fleet_trial(fault_bed, url, tmp_path, plan, strike=strike_thrift(thrift), store=store))
    check_fetches_nothing(rec)
