"""Fault trial on the store under the fleet: the HBase process that holds the data, SIGKILLed mid-crawl.

The fleet runs the design card's loop with its store in a private
standalone HBase (pipeline.harness.faults.hbase_private): the fetch nodes write pages there, the link
jobs write the crawl db and the pending set there, the dispatcher reads them from there. Once a seeded
share of the expected requests has reached the testbed, the master JVM (master + region server +
ZooKeeper) gets SIGKILL; after a seeded pause it is started again on the same data directory. The
Thrift gateway stays up (a separate JVM, as a separate machine would be in a cluster).

HBase fetches nothing, so no repeat is excused (its ``Strike`` names no fetching process). The lease is the
product's default (120 s), not the rig's 15 s: a restart of HBase takes 15-30 s on this machine, and
a node waiting on the store for that long is slow, not dead (pipeline/storage/hbase.py retries).

recovery_s = from the kill to the first batch completed after HBase answers again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.harness.faults.accounting import Strike
from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.fleet import FleetRig
from pipeline.harness.faults.fleet_trials import Struck, run_fleet_trial
from pipeline.harness.faults.hbase_private import PrivateHBase
from pipeline.settings import DispatchSettings, StoreSettings

LEASE_S = DispatchSettings().lease_s


def strike_hbase(hbase: PrivateHBase) -> Callable[[FleetRig, TrialPlan], Struck]:
    def strike(rig: FleetRig, plan: TrialPlan) -> Struck:
        fault_t = hbase.kill_master()
        time.sleep(plan.down_s)
        hbase.start_master()
        back_t = hbase.wait_ready()  # the crawl goes on meanwhile; this only says when HBase was back

        def recovered(ev: dict[str, Any]) -> bool:
            return ev["ev"] == "done" and float(ev["t"]) >= back_t

        return Struck(Strike("hbase", "SIGKILL", fault_t, back_t), recovered)

    return strike


def hbase_trial(bed: Bed, broker_url: str, hbase: PrivateHBase, workdir: Path, plan: TrialPlan) -> dict[str, Any]:
    """One fleet crawl into ``hbase`` (fresh tables per trial) with the data JVM killed once."""
    store = StoreSettings(kind="hbase", hbase_port=hbase.thrift_port, hbase_prefix=f"{hbase.prefix}s{plan.seed}")
    rec = run_fleet_trial(bed, broker_url, workdir, plan, strike=strike_hbase(hbase), store=store,
                          rig_kw={"lease_s": LEASE_S})  # fmt: skip
    rec["summary"]["hbase"] = {"lease_s": LEASE_S, "thrift_port": hbase.thrift_port}
    return rec
