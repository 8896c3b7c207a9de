"""Fault trials on the fleet's store, a private standalone HBase (its own data directory and ports:
scripts/hbase-private.sh), with the fleet on the design card's loop (nodes write pages to HBase,
`crawlfleet links` writes the crawl db and the pending set there):

- the HBase master JVM (master + region server + ZooKeeper: the process that holds the data)
  SIGKILLed mid-crawl and started again on the same data (pipeline.harness.faults.storage_trials);
- the link-jobs driver SIGKILLed inside a seeded round, in the extract job or inside the merge (its
  HBase update under way), on the local and the spark runners (pipeline.harness.faults.links_trial).

Judged from the testbed's access log and the store: no page lost, and no page fetched twice. Neither
HBase nor the link jobs fetch anything, so no repeat is excused at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.hbase_private import PrivateHBase
from pipeline.harness.faults.links_trial import links_trial
from pipeline.harness.faults.services import broker_vhost
from pipeline.harness.faults.storage_trials import hbase_trial
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.settings import StoreSettings
from tests.faults.verdict import check_fetches_nothing
from tests.services import need_java

pytestmark = [pytest.mark.faults, pytest.mark.integration]

LINK_TRIALS: dict[str, dict[str, Any]] = {}  # runner/phase/seed -> the trial's in-link figures


@pytest.fixture(scope="module")
def private_hbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateHBase]:
    need_java()
    hb = PrivateHBase(tmp_path_factory.mktemp("hbase-private")).start()
    try:
        yield hb
    finally:
        hb.stop()


@pytest.mark.timeout(600)  # the first one also boots the private HBase (30-60 s)
@pytest.mark.parametrize("seed", [1, 2])
def test_hbase_data_process_sigkill_then_restart(fault_bed: Bed, private_hbase: PrivateHBase, tmp_path: Path,
                                                 record: Callable[..., Any], seed: int) -> None:  # fmt: skip
    with broker_vhost() as url:
        rec = record(hbase_trial(fault_bed, url, private_hbase, tmp_path, TrialPlan.seeded("hbase", "kill", seed)))
    check_fetches_nothing(rec)


@pytest.fixture(scope="module")
def shallow_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    """5 hosts x 16 pages to depth 3: a crawl needs about one link round per level, and a round starts
    processes (local runner: seconds; Spark: JVMs, ~20 s), so the link-jobs trials crawl a shallow web
    (as tests/integration does for Spark)."""
    bed = Bed(TestbedProcess(5, 16, seed=22, workdir=tmp_path_factory.mktemp("shallow-bed")).start(), max_depth=3)
    try:
        yield bed
    finally:
        bed.close()


@pytest.mark.parametrize(("runner", "phase", "seed"), [
    pytest.param("local", "merge", 1, marks=pytest.mark.timeout(600)),
    pytest.param("local", "extract", 2, marks=pytest.mark.timeout(600)),
    # Spark: each round is two spark-submits (~20 s idle, 60 s and more on a loaded 2-core machine), so
    # this crawl stops at depth 1 (two rounds) and may take minutes.
    pytest.param("spark", "merge", 1, marks=pytest.mark.timeout(1200)),
])  # fmt: skip
def test_link_jobs_sigkill_inside_a_round(shallow_bed: Bed, private_hbase: PrivateHBase,
                                          tmp_path: Path, record: Callable[..., Any], runner: str, phase: str,
                                          seed: int, request: pytest.FixtureRequest) -> None:  # fmt: skip
    if runner == "spark":
        request.getfixturevalue("spark_ready")
    store = StoreSettings(kind="hbase", hbase_port=private_hbase.thrift_port,
                          hbase_prefix=f"{private_hbase.prefix}l{runner[0]}{phase[0]}{seed}")  # fmt: skip
    plan = TrialPlan.seeded("links", f"kill-{phase}", seed, lo=0.02, hi=0.1)
    with broker_vhost() as url:
        bed = Bed(shallow_bed.tb, max_depth=1) if runner == "spark" else shallow_bed
        rec = record(links_trial(bed, url, tmp_path, plan, runner=runner, phase=phase, store=store))
    check_fetches_nothing(rec)
    LINK_TRIALS[f"{runner}/{phase}/{seed}"] = rec["inlinks"]  # judged by the test below


def test_link_jobs_killed_in_a_merge_count_each_link_once() -> None:
    """The store after the link-jobs trials above, beyond the pages: every URL's in-link count equals
    that of the jobs run once over the crawl's own segments (no link counted twice or dropped).

    A round killed inside its merge is run again from its manifest (``SEGMENTS/.rounds``) under the same
    round id, and the store skips every URL whose in-links that round has counted (HBase ``m:L``). Before
    that (#18 point 6) the re-run counted them again: 17 of 108 URLs over, sum 1058 against 1040."""
    if not LINK_TRIALS:
        pytest.skip("no link-jobs trial ran in this session")
    wrong = {k: v for k, v in LINK_TRIALS.items() if v["over"] or v["under"] or v["urls_missing"]}
    assert not wrong, wrong
