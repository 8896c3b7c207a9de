"""Fault trials on the fleet: a fetch worker, the dispatcher, RabbitMQ and the HBase Thrift server.

Each trial crawls the bed with two fetch nodes and one dispatcher (fresh processes), strikes once a
seeded share of the expected requests has reached the testbed, and brings the component back after
a seeded pause:

============  ======  =====================================================================
component     action  fault                                     recovery_s = fault to ...
============  ======  =====================================================================
worker        kill    SIGKILL a node holding a batch, restart   its batches re-issued (or it is back)
worker        stop    SIGSTOP a node holding a batch, SIGCONT   its batches re-issued (or it is back)
dispatcher    kill    SIGKILL, ``dispatcher --resume``          the first batch issued again
dispatcher    stop    SIGSTOP, SIGCONT                          the first batch issued again
rabbitmq      kill    SIGKILL a private node, start it again    the first batch completed through it
rabbitmq      stop    SIGSTOP the node, SIGCONT                 the first batch completed through it
thrift        kill    SIGKILL a private Thrift server, restart  the first batch completed after it
links         kill    SIGKILL the link jobs, start them again   the first links report after it
links         stop    SIGSTOP the link jobs, SIGCONT            the first links report after it
============  ======  =====================================================================
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.harness.faults.accounting import RECENT_S, Strike, account
from pipeline.harness.faults.bed import PACE_S, Bed, TrialPlan
from pipeline.harness.faults.fleet import FleetRig
from pipeline.harness.faults.procs import HarnessError, Managed, wait_until
from pipeline.harness.faults.snapshot import stored_urls
from pipeline.settings import StoreSettings


@dataclass(slots=True)
class Struck:
    strike: Strike  # the injector's record: which processes, which signal, when
    recovery_event: Callable[[dict[str, Any]], bool]  # the event that says the crawl got going again

    @property
    def fault_t(self) -> float:
        return self.strike.fault_t


def hit(proc: Managed, process: str, plan: TrialPlan, *, fetches: bool,
        restart: Callable[[], float] | None = None) -> Strike:  # fmt: skip
    """SIGKILL (then ``restart``, which returns when it was back) or SIGSTOP (then SIGCONT) ``proc``'s
    group after ``plan.down_s``; the strike names the processes the signal reached if they fetch."""
    if plan.action == "kill":
        fault_t = proc.kill()
        pids = proc.struck
        time.sleep(plan.down_s)
        back_t = restart() if restart is not None else time.time()
    else:
        fault_t = proc.pause()
        pids = proc.struck
        time.sleep(plan.down_s)
        back_t = proc.resume()
    sig = "SIGKILL" if plan.action == "kill" else "SIGSTOP"
    return Strike(process, sig, fault_t, back_t, pids if fetches else frozenset())


def _wait_share(bed: Bed, rig: FleetRig, start: float, plan: TrialPlan, *, timeout_s: float = 180.0) -> int:
    target = max(1, int(bed.expected_requests * plan.at_fraction))

    def reached() -> bool:
        if not rig.dispatcher.running:
            raise HarnessError(f"the dispatcher exited before the fault point:\n{rig.dispatcher.log_tail()}")
        return bed.count_since(start) >= target

    wait_until(reached, timeout_s=timeout_s, what=f"{target} requests")
    return target


def run_fleet_trial(
    bed: Bed,
    broker_url: str,
    workdir: Path,
    plan: TrialPlan,
    *,
    strike: Callable[[FleetRig, TrialPlan], Struck],
    store: StoreSettings | None = None,
    before_end: Callable[[], None] | None = None,
    rig_kw: dict[str, Any] | None = None,
    timeout_s: float = 240.0,
) -> dict[str, Any]:
    """One fleet crawl with one fault (``strike`` does it and says when the component was back).
    ``rig_kw``: more FleetRig arguments (lease, link-jobs runner, environment); ``timeout_s``: how long
    the crawl may take after the fault. Judged from the access log, the truth, the strike and the store."""
    rig = FleetRig(bed, broker_url, workdir, store=store, **(rig_kw or {}))
    start = time.time()
    try:
        rig.start_worker(1)
        rig.start_worker(2)
        rig.start_dispatcher()
        rig.nodes_up(2)
        at = _wait_share(bed, rig, start, plan)
        struck = strike(rig, plan)
        summary = rig.wait_dispatcher(timeout_s=timeout_s)
        end_t = time.time()
        if before_end is not None:
            before_end()
    finally:
        rig.close()
    bed.settle()
    hit_ = struck.strike
    acc = account(truth=bed.truth, log=bed.window(start), stored_urls=stored_urls(rig.out, rig.store),
                  strike=Strike(hit_.process, hit_.signal, hit_.fault_t, hit_.back_t, hit_.pids, end_t))  # fmt: skip
    back = rig.first_event_after(struck.fault_t, struck.recovery_event)
    acc.recovery_s = round(back - struck.fault_t, 3) if back is not None else acc.recovery_s
    fleet = summary.get("fleet") or {}
    keep = ("expired_batches", "duplicate_results", "late_reports", "purged_messages", "dead_lettered", "resends",
            "reconnects", "paused_s")  # fmt: skip
    return {
        "type": "fault", "mode": "fleet", "component": plan.component, "action": plan.action, "seed": plan.seed,
        "at_fraction": plan.at_fraction, "fault_after_requests": at, "down_s": plan.down_s,
        "wall_s": round(end_t - start, 3), **acc.to_json(),
        "summary": {"pages_fetched": summary.get("pages_fetched"), "pages_failed": summary.get("pages_failed"),
                    "errors_by_class": summary.get("errors_by_class"), "results_dropped": summary.get("results_dropped"),
                    "fleet": {k: fleet.get(k) for k in keep}},
    }  # fmt: skip


# A trial that strikes a fetch node crawls at the product's default pace (pipeline.harness.faults.bed.PACE_S)
# and strikes a node that has held a batch this long.
PACED: dict[str, Any] = {"host_delay": PACE_S}
HELD_S = 3 * RECENT_S


# --- strikes -------------------------------------------------------------------------------------------
def strike_worker(rig: FleetRig, plan: TrialPlan) -> Struck:
    """The fetch node holding a batch for a while (``ripe_worker``): its worker process group (the
    fetching processes) killed and restarted, or stopped."""
    i = ripe_worker(rig)
    node = rig.node(i)

    def restart() -> float:
        rig.start_worker(i)
        return time.time()

    def recovered(ev: dict[str, Any]) -> bool:  # its work re-issued, or (holding none) the node back
        return ev.get("node") == node and ev["ev"] in ("expired", "node_up", "node_back")

    return Struck(hit(rig.workers[node], "worker", plan, fetches=True, restart=restart), recovered)


def ripe_worker(rig: FleetRig, *, timeout_s: float = 90.0) -> int:
    """The node (1 or 2) that holds a batch issued at least ``HELD_S`` ago and not yet done, read from
    the dispatcher's events: when to strike is the injector's choice (the judge never reads them). At
    the trial's pace such a node has completed requests older than the judge's ``RECENT_S``, so the
    trial tests what a kill costs beyond the last second; the dispatcher may also keep one node idle
    while the other has the work, and striking the idle one tests nothing."""
    found: list[int] = []

    def ripe() -> bool:
        if not rig.dispatcher.running:
            raise HarnessError(f"the dispatcher exited before the strike:\n{rig.dispatcher.log_tail()}")
        events, now = rig.events(), time.time()
        closed = {ev["serial"] for ev in events if ev["ev"] in ("done", "expired")}
        for i in (1, 2):
            held = [float(ev["t"]) for ev in events
                    if ev["ev"] == "issue" and ev["node"] == rig.node(i) and ev["serial"] not in closed]  # fmt: skip
            if held and now - min(held) >= HELD_S:
                found[:] = [i]
                return True
        return False

    wait_until(ripe, timeout_s=timeout_s, every_s=0.05, what=f"a fetch node holding a batch for {HELD_S:g} s")
    return found[0]


def strike_dispatcher(rig: FleetRig, plan: TrialPlan) -> Struck:
    def restart() -> float:
        t = time.time()
        rig.start_dispatcher(resume=True)
        return t

    return Struck(hit(rig.dispatcher, "dispatcher", plan, fetches=False, restart=restart), lambda ev: ev["ev"] == "issue")


def strike_rabbit(rabbit: Any) -> Callable[[FleetRig, TrialPlan], Struck]:
    """``rabbit`` is a pipeline.harness.faults.services.PrivateRabbit the rig's broker URL points at.
    A stop hangs the node: connections stay open and go silent."""

    def strike(rig: FleetRig, plan: TrialPlan) -> Struck:
        return Struck(hit(rabbit.proc, "rabbitmq", plan, fetches=False, restart=rabbit.restart),
                      lambda ev: ev["ev"] == "done")  # fmt: skip

    return strike


def strike_thrift(thrift: Any) -> Callable[[FleetRig, TrialPlan], Struck]:
    """``thrift`` is a pipeline.harness.faults.services.PrivateThrift the rig's HBase store talks to."""

    def strike(rig: FleetRig, plan: TrialPlan) -> Struck:
        return Struck(hit(thrift.proc, "thrift", plan, fetches=False, restart=thrift.restart),
                      lambda ev: ev["ev"] == "done")  # fmt: skip

    return strike


def strike_links(rig: FleetRig, plan: TrialPlan) -> Struck:
    """The link jobs, killed mid-round or stopped, then started again. They fetch nothing, so nothing
    may be fetched twice because of them and nothing may be lost."""

    def restart() -> float:
        t = time.time()
        rig.start_links()
        return t

    return Struck(hit(rig.links, "links", plan, fetches=False, restart=restart), lambda ev: ev["ev"] == "links")


STRIKES: dict[str, Callable[[FleetRig, TrialPlan], Struck]] = {
    "worker": strike_worker,
    "dispatcher": strike_dispatcher,
    "links": strike_links,
}
