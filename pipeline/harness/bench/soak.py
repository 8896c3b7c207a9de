"""``crawlfleet bench soak --minutes N``: fault trials back to back for N minutes (outside CI).

The same seeded trials as the faults tier (pipeline/harness/faults), going through the components in a
seeded random order (each component once per round, the order shuffled every round) with fresh seeds
and alternating SIGKILL and SIGSTOP, until the time is up. ``hbase`` kills the JVM that holds the data
of a private standalone HBase (master + region server); ``links`` kills the link-jobs driver (local
runner) inside its extract job or its merge, storing into that HBase. Every trial is judged from the
testbed's access log and the store and appended to ``var/reliability/soak.jsonl`` (``--results``).

Baseline, measured in the same run: one clean embedded crawl and (with fleet components) one clean
fleet crawl of the same testbed. The report gives lost pages and repeated requests per trial and the trial's
wall time as a ratio to the clean crawl of its mode (what a fault costs in time, recovery included).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pipeline.harness.faults import results
from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.procs import HarnessError

ALL = ("crawler", "parser", "unbound", "worker", "dispatcher", "rabbitmq", "thrift", "hbase", "links", "jobs")
FLEET = frozenset({"worker", "dispatcher", "rabbitmq", "thrift", "hbase", "links"})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--minutes", type=float, default=10.0, help="how long to keep running trials")
    p.add_argument("--components", default=",".join(ALL), help=f"comma list out of {','.join(ALL)}")
    p.add_argument("--hosts", type=int, default=8, help="testbed hosts of each trial's crawl")
    p.add_argument("--pages", type=int, default=25, help="pages per host of each trial's crawl")
    p.add_argument("--seed", type=int, default=100, help="first trial seed (each trial takes the next)")
    p.add_argument(
        "--results",
        default="",
        help="JSON-lines file for the trial records (default var/reliability/soak.jsonl)",
    )
    p.add_argument(
        "--kill-only",
        action="store_true",
        help="SIGKILL in every trial (default: SIGKILL and SIGSTOP by seed)",
    )
    p.add_argument("--workdir", default="", help="keep trial directories here (default: a temp dir, removed)")


def _plan(component: str, seed: int, *, kill_only: bool = False) -> TrialPlan:
    action = "kill" if kill_only or seed % 2 == 0 or component in ("jobs", "thrift") else "stop"
    down = (1.0, 3.0) if action == "stop" else (0.3, 2.0)
    return TrialPlan.seeded(component, action, seed, down=down)


class _Services:
    """Broker vhost, private RabbitMQ node and private Thrift server, started on first use."""

    def __init__(self, stack: contextlib.ExitStack, workdir: Path) -> None:
        self.stack, self.workdir = stack, workdir
        self._vhost: str | None = None
        self._rabbit: Any = None
        self._thrift: Any = None
        self._hbase: Any = None

    def vhost(self) -> str:
        if self._vhost is None:
            from pipeline.harness.faults.services import broker_vhost

            self._vhost = self.stack.enter_context(broker_vhost())
        return self._vhost

    def rabbit(self) -> Any:
        if self._rabbit is None:
            from pipeline.harness.faults.services import PrivateRabbit

            self._rabbit = PrivateRabbit(self.workdir / "rabbit").start()
            self.stack.callback(self._rabbit.stop)
        return self._rabbit

    def thrift(self) -> Any:
        if self._thrift is None:
            from pipeline.harness.faults.services import PrivateThrift

            self._thrift = PrivateThrift(self.workdir / "thrift").start()
            self.stack.callback(self._thrift.stop)
        return self._thrift

    def hbase(self) -> Any:
        """A private standalone HBase (data JVM + Thrift JVM), started once (30-60 s)."""
        if self._hbase is None:
            from pipeline.harness.faults.hbase_private import PrivateHBase

            self._hbase = PrivateHBase(self.workdir / "hbase").start()
            self.stack.callback(self._hbase.stop)
        return self._hbase


def _trial(
    component: str,
    bed: Bed,
    svc: _Services,
    work: Path,
    seed: int,
    jobs_input: Callable[[], Any],
    *,
    kill_only: bool,
) -> dict[str, Any]:
    from pipeline.harness.faults import embedded, fleet_trials

    plan = _plan(component, seed, kill_only=kill_only)
    if component == "crawler":
        return embedded.crawler_trial(bed, work, plan)
    if component == "parser":
        return embedded.parser_trial(bed, work, plan)
    if component == "unbound":
        return embedded.unbound_trial(bed, work, TrialPlan.seeded("unbound", "kill", seed))
    if component == "jobs":
        from pipeline.harness.faults.jobs_trial import jobs_trial

        segments, ref = jobs_input()
        return jobs_trial(bed, segments, ref, work, TrialPlan.seeded("jobs", "kill", seed))
    if component in ("worker", "dispatcher"):
        return fleet_trials.run_fleet_trial(
            bed, svc.vhost(), work, plan, strike=fleet_trials.STRIKES[component],
            rig_kw=fleet_trials.PACED if component == "worker" else None,
        )
    if component == "rabbitmq":
        rabbit = svc.rabbit()
        return fleet_trials.run_fleet_trial(
            bed, rabbit.url, work, plan, strike=fleet_trials.strike_rabbit(rabbit)
        )
    if component == "hbase":
        from pipeline.harness.faults.storage_trials import hbase_trial

        return hbase_trial(bed, svc.vhost(), svc.hbase(), work, TrialPlan.seeded("hbase", "kill", seed))
    if component == "links":
        from pipeline.harness.faults.links_trial import links_trial
        from pipeline.settings import StoreSettings

        hb = svc.hbase()
        phase = ("extract", "merge")[seed % 2]
        store = StoreSettings(kind="hbase", hbase_port=hb.thrift_port, hbase_prefix=f"{hb.prefix}k{seed}")
        plan = TrialPlan.seeded("links", f"kill-{phase}", seed, lo=0.02, hi=0.1)
        return links_trial(bed, svc.vhost(), work, plan, runner="local", phase=phase, store=store)
    if component == "thrift":
        from pipeline.settings import StoreSettings

        thrift = svc.thrift()
        store = StoreSettings(
            kind="hbase", hbase_port=thrift.port, hbase_prefix=f"soak{uuid.uuid4().hex[:8]}"
        )
        plan = TrialPlan.seeded("thrift", "kill", seed)
        return fleet_trials.run_fleet_trial(bed, svc.vhost(), work, plan, strike=fleet_trials.strike_thrift(thrift),
                                            store=store)  # fmt: skip
    raise ValueError(f"unknown component {component!r}")


def _baseline(mode: str, bed: Bed, svc: _Services, work: Path) -> float:
    """Wall seconds of a clean crawl (no fault) of ``bed`` in ``mode``."""
    from pipeline.harness.faults.embedded import crawler, finish

    start = time.time()
    if mode == "embedded":
        proc = crawler(bed, work).start()
        finish(bed, proc)
        return round(time.time() - start, 3)
    from pipeline.harness.faults.fleet import FleetRig

    rig = FleetRig(bed, svc.vhost(), work)
    try:
        rig.start_worker(1)
        rig.start_worker(2)
        rig.start_dispatcher()
        rig.wait_dispatcher()
    finally:
        rig.close()
    return round(time.time() - start, 3)


def _order(components: list[str], seed: int) -> Iterator[str]:
    """Every component once per round, in an order shuffled each round (seeded: a run can be repeated)."""
    rng = random.Random(f"soak/{seed}")
    while True:
        round_ = list(components)
        rng.shuffle(round_)
        yield from round_


@contextlib.contextmanager
def _workdir(path: str) -> Iterator[Path]:
    if path:
        Path(path).mkdir(parents=True, exist_ok=True)
        yield Path(path)
        return
    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    components = [c.strip() for c in args.components.split(",") if c.strip()]
    unknown = set(components) - set(ALL)
    if unknown:
        raise SystemExit(f"bench soak: unknown components {sorted(unknown)}")
    out_path = Path(args.results) if args.results else results.DEFAULT_PATH.with_name("soak.jsonl")
    deadline = time.monotonic() + args.minutes * 60
    records: list[dict[str, Any]] = []
    errors: list[str] = []
    with _workdir(args.workdir) as work, contextlib.ExitStack() as stack:
        bed = Bed.start(args.hosts, args.pages, seed=7, workdir=work / "tb")
        stack.callback(bed.close)
        svc = _Services(stack, work)
        baselines = {"embedded": _baseline("embedded", bed, svc, work / "base-embedded")}
        if FLEET & set(components):
            baselines["fleet"] = _baseline("fleet", bed, svc, work / "base-fleet")
        jobs_cache: list[Any] = []

        def jobs_input() -> Any:
            if not jobs_cache:
                from pipeline.harness.faults.jobs_trial import make_segments, reference

                segs = make_segments(bed, work / "jobs-input", pieces=2)
                jobs_cache.append((segs, reference(bed, segs, work / "jobs-ref")))
            return jobs_cache[0]

        seeds = itertools.count(args.seed)
        for component in _order(components, args.seed):
            if time.monotonic() >= deadline:
                break
            seed = next(seeds)
            trial_dir = work / f"{component}-{seed}"
            try:
                rec = _trial(component, bed, svc, trial_dir, seed, jobs_input, kill_only=args.kill_only)
            except (HarnessError, OSError, TimeoutError, RuntimeError, subprocess.SubprocessError) as exc:
                errors.append(f"{component} seed {seed}: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            finally:
                if not args.workdir:
                    shutil.rmtree(trial_dir, ignore_errors=True)
            base = baselines.get(
                rec.get("mode", "").split(",")[0], 0.0
            )  # "fleet, local runner, ..." is fleet
            rec["suite"] = "soak"
            rec["wall_vs_clean"] = round(rec["wall_s"] / base, 2) if base else None
            records.append(results.append(rec, path=out_path))
    return _summary(records, baselines, errors, args, out_path)


def _summary(records: list[dict[str, Any]], baselines: dict[str, float], errors: list[str],
             args: argparse.Namespace, out_path: Path) -> dict[str, Any]:  # fmt: skip
    per: dict[str, dict[str, Any]] = {}
    figures = ("lost", "repeats", "repeats_unexcused", "in_flight_repeats", "recent_repeats", "woken_repeats",
               "robots_extra")  # fmt: skip
    for r in records:
        key = f"{r['component']}/{r['action']}"
        g = per.setdefault(key, {"trials": 0, **dict.fromkeys(figures, 0), "failed_seeds": [],
                                 "recovery_s": [], "wall_vs_clean": []})  # fmt: skip
        g["trials"] += 1
        if not r.get("ok"):
            g["failed_seeds"].append(r.get("seed"))
        for k in figures:
            g[k] += int(r.get(k) or 0)
        if r.get("recovery_s") is not None:
            g["recovery_s"].append(r["recovery_s"])
        if r.get("wall_vs_clean") is not None:
            g["wall_vs_clean"].append(r["wall_vs_clean"])
    for g in per.values():
        rec_s, ratio = g.pop("recovery_s"), g.pop("wall_vs_clean")
        g["recovery_s_median"] = round(statistics.median(rec_s), 2) if rec_s else None
        g["recovery_s_max"] = round(max(rec_s), 2) if rec_s else None
        g["wall_vs_clean_median"] = round(statistics.median(ratio), 2) if ratio else None
    total = len(records)
    return {
        "minutes": args.minutes,
        "trials": total,
        "trials_per_minute": round(total / args.minutes, 2) if args.minutes else None,
        "lost_total": sum(int(r.get("lost") or 0) for r in records),
        "repeats_total": sum(int(r.get("repeats") or 0) for r in records),
        "repeats_unexcused_total": sum(int(r.get("repeats_unexcused") or 0) for r in records),
        "trials_ok": sum(1 for r in records if r.get("ok")),
        "clean_crawl_wall_s": baselines,
        "by_fault": per,
        "harness_errors": errors,
        "results_file": str(out_path),
        "machine": results.machine() | {"pid": os.getpid()},
    }
