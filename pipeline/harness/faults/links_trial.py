"""Fault trial on the fleet's link jobs (``crawlfleet links``) on a real mrjob runner, killed at a seeded
point of a seeded round: inside the extract job, or inside the merge (the update job, once some of its
writes to HBase have landed and before the round is reported and its segments marked done).

The point is found from outside, without hooks in the product: mrjob runs each job in a temp
directory named after the job's script (``mr_extract_links.*``, ``mr_update_crawldb.*``; on a cluster
runner such as spark the round is one job, ``mr_link_round.*``) under the driver's ``--work-dir``,
present while the job runs; the merge's progress is the row count of the
crawl's ``crawldb`` table in HBase (only the link jobs add rows to it once the seeds are in).

- ``extract``: the round-th extract job has started; kill after a seeded share of ``EXTRACT_S``.
- ``merge``: the round-th update job has started and the crawldb has gained a row since (its HBase
  update is under way or just done); kill at once. If the job ends without adding a row (nothing new
  that round), kill at once after it: between the merge and the round's marker.

SIGKILL goes to the driver's process group: the driver, its mrjob subprocesses (local runner: the
task processes; spark: spark-submit, its JVM and Python workers). The driver is then started again
and the crawl must end as without a fault. The link jobs fetch nothing, so no repeat is excused.
"""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path
from typing import Any

from jobs.runnerconfig import CLUSTER_RUNNERS
from pipeline.harness.faults.accounting import Strike
from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.fleet import FleetRig
from pipeline.harness.faults.fleet_trials import Struck, run_fleet_trial
from pipeline.harness.faults.jobs_trial import crawl_db, jobs_cmd, seed_db
from pipeline.harness.faults.procs import HarnessError, wait_until
from pipeline.settings import StoreSettings
from pipeline.storage.hbase_cells import FOLDED, INLINKS, inlinks_of

EXTRACT_S = {"local": 1.0, "spark": 8.0}  # about how long an extract job runs on this machine
PHASES = ("extract", "merge")
# A Spark round is one spark-submit (two before the one-job round): ~20 s on an idle machine, more under load.
CRAWL_TIMEOUT_S = {"spark": 720.0}
# A job per round, so that the strike sees it start (its mrjob temp directory): on Spark the default keeps
# one application for all rounds (cluster.spark_app = long, jobs/sparkapp.py), which shows no such point
# from outside; that path is not struck here.
PER_ROUND_JOBS = {"CRAWLFLEET_CLUSTER_SPARK_APP": "per-round"}


def crawldb_rows(store: StoreSettings) -> int:
    import happybase

    conn = happybase.Connection(store.hbase_host, store.hbase_port, table_prefix=store.hbase_prefix, timeout=20000)
    try:
        return sum(1 for _ in conn.table("crawldb").scan(filter=b"KeyOnlyFilter()", batch_size=5000))
    finally:
        conn.close()


def hbase_inlinks(store: StoreSettings) -> dict[str, int]:
    """URL -> in-link count of every row of the crawl's ``crawldb`` table."""
    import happybase

    conn = happybase.Connection(store.hbase_host, store.hbase_port, table_prefix=store.hbase_prefix, timeout=20000)
    try:
        rows = conn.table("crawldb").scan(columns=[b"m:u", b"m:n", FOLDED, INLINKS], batch_size=5000)
        return {row[b"m:u"].decode(): inlinks_of(row) for _, row in rows}
    finally:
        conn.close()


def reference_inlinks(bed: Bed, out: Path, work: Path) -> dict[str, int]:
    """In-links after the link jobs ran once over every segment the crawl's nodes wrote (one inline
    ``crawlfleet jobs run`` per segment into a fresh SQLite crawl db): what the store should say."""
    segments = sorted((out / "node-segments").glob("**/*.jsonl"))
    db = work / "ref.db"
    seed_db(db, bed)
    for seg in segments:
        proc = subprocess.run(jobs_cmd(seg, db, work / "ref-work", bed, runner="inline", one=True),
                              capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise HarnessError(f"reference jobs run failed on {seg}: {proc.stderr[-2000:]}")
    return crawl_db(db)


def _jobs_running(work: Path, label: str) -> set[str]:
    return {p.name for p in work.glob(f"{label}.*")} if work.is_dir() else set()


def strike_links_at(phase: str, round_no: int, *, runner: str, store: StoreSettings, seed: int,
                    landed: dict[str, Any]) -> Any:  # fmt: skip
    """A strike for run_fleet_trial that waits for its point itself (see the module docstring)."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}")
    rng = random.Random(f"links/{runner}/{phase}/{seed}")

    def strike(rig: FleetRig, plan: TrialPlan) -> Struck:
        work = rig.workdir / "jobs-work"
        # A cluster runner (spark) runs a round as one job, extract and merge chained (jobs/mr_link_round.py).
        label = ("mr_link_round" if runner in CLUSTER_RUNNERS
                 else "mr_extract_links" if phase == "extract" else "mr_update_crawldb")  # fmt: skip
        seen: set[str] = set()
        current: list[str] = []

        def started() -> bool:
            if not rig.links.running or not rig.dispatcher.running:
                raise HarnessError(f"links or dispatcher exited before round {round_no}:\n{rig.links.log_tail()}")
            new = _jobs_running(work, label) - seen
            seen.update(new)
            if new and len(seen) >= round_no:
                current[:] = sorted(new)[-1:]
                return True
            return False

        wait_until(started, timeout_s=240, every_s=0.02, what=f"{label} job #{round_no}")
        landed.update(phase=phase, round=round_no, job=current[0])
        if phase == "extract":
            delay = round(rng.uniform(0.1, 0.9) * EXTRACT_S.get(runner, 1.0), 2)
            time.sleep(delay)
            landed["delay_s"] = delay
        else:
            rows0 = crawldb_rows(store)
            landed["rows_at_start"] = rows0
            while (work / current[0]).exists() and crawldb_rows(store) == rows0:
                time.sleep(0.02)
        landed["job_still_running"] = (work / current[0]).exists()
        fault_t = rig.links.kill()
        landed["rows_at_kill"] = crawldb_rows(store) if phase == "merge" else None
        landed["segments_left"] = len(list((rig.out / "node-segments").glob("*/*.jsonl")))
        time.sleep(plan.down_s)
        back_t = time.time()
        rig.start_links()
        return Struck(Strike("links", "SIGKILL", fault_t, back_t), lambda ev: ev["ev"] == "links")

    return strike


def links_trial(bed: Bed, broker_url: str, workdir: Path, plan: TrialPlan, *, runner: str, phase: str,
                store: StoreSettings) -> dict[str, Any]:  # fmt: skip
    """One fleet crawl (store in HBase, link jobs on ``runner``) with the link jobs killed once."""
    # The round: seeded among the first two; Spark's trial crawl is two rounds deep, so its first.
    round_no = 1 if runner == "spark" else random.Random(f"links-round/{runner}/{phase}/{plan.seed}").randint(1, 2)
    landed: dict[str, Any] = {}
    strike = strike_links_at(phase, round_no, runner=runner, store=store, seed=plan.seed, landed=landed)
    rec = run_fleet_trial(bed, broker_url, workdir, plan, strike=strike, store=store,
                          rig_kw={"links_runner": runner, "extra_env": PER_ROUND_JOBS},
                          timeout_s=CRAWL_TIMEOUT_S.get(runner, 240.0))  # fmt: skip
    rec["action"] = "kill"  # the plan's "kill-<phase>" only seeds its stream; the phase is in the mode
    rec["mode"] = f"fleet, {runner} runner, in {phase}"  # its own row in RELIABILITY.md
    rec["summary"]["links"] = {"runner": runner, **landed}
    # The store, beyond the pages: a merge run twice must not count a link twice (nor drop one).
    ref = reference_inlinks(bed, workdir / "out", workdir / "ref")
    got = hbase_inlinks(store)
    over = sorted(u for u, n in ref.items() if got.get(u, 0) > n)
    under = sorted(u for u, n in ref.items() if got.get(u, 0) < n)
    rec["inlinks"] = {"urls_ref": len(ref), "urls_missing": sum(1 for u in ref if u not in got),
                      "over": len(over), "under": len(under), "sum_ref": sum(ref.values()),
                      "sum_trial": sum(got.get(u, 0) for u in ref), "over_sample": over[:5],
                      "under_sample": under[:5]}  # fmt: skip
    return rec
