"""Fault trial on the HBase that holds the fleet's data (pipeline.harness.faults.storage_trials): a private
standalone HBase (its own data directory and ports: scripts/hbase-private.sh), its master JVM (master +
region server + ZooKeeper) SIGKILLed mid-crawl and started again on the same data. The fleet runs the
design card's loop (nodes write pages to HBase, `crawlfleet links` writes the pending set there).

Judged from the testbed's access log and the store: no page lost, and no page fetched twice. HBase
fetches nothing, so no repeat is excused at all.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.hbase_private import PrivateHBase
from pipeline.harness.faults.services import broker_vhost
from pipeline.harness.faults.storage_trials import hbase_trial

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def check_strict(rec: dict[str, Any]) -> None:
    """Exactly once with a killed process that fetches nothing: no loss, no repeat of any kind."""
    assert rec["lost"] == 0, rec["lost_sample"]
    assert rec["stored_pages"] == rec["truth_pages"]
    assert rec["duplicated"] == 0, (rec["duplicated_causes"], rec["duplicated_sample"])
    assert rec["in_flight_repeats"] == 0, rec


@pytest.fixture(scope="module")
def private_hbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateHBase]:
    if shutil.which("java") is None:
        pytest.skip("java not installed (scripts/svc-hbase.sh install)")
    hb = PrivateHBase(tmp_path_factory.mktemp("hbase-private")).start()
    try:
        yield hb
    finally:
        hb.stop()


@pytest.mark.parametrize("seed", [1, 2])
def test_hbase_data_process_sigkill_then_restart(fault_bed: Bed, private_hbase: PrivateHBase, tmp_path: Path,
                                                 record: Callable[..., Any], seed: int) -> None:  # fmt: skip
    with broker_vhost() as url:
        rec = record(hbase_trial(fault_bed, url, private_hbase, tmp_path, TrialPlan.seeded("hbase", "kill", seed)))
    check_strict(rec)
