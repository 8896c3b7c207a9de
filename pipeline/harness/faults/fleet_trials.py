"""Fault trials on the fleet: a fetch worker, the dispatcher, RabbitMQ and the HBase Thrift server.

Each trial crawls the bed with two fetch nodes and one dispatcher (fresh processes), strikes once a
seeded share of the expected requests has reached the testbed, and brings the component back after
a seeded pause:

============  ======  =====================================================================
component     action  fault                                     recovery_s = fault to ...
============  ======  =====================================================================
worker        kill    SIGKILL node 1, start it again            its batches re-issued (or it is back)
worker        stop    SIGSTOP node 1, SIGCONT                   its batches re-issued (or it is back)
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

from pipeline.harness.faults.accounting import FaultTimes, Key, Killed, account, journaled_keys, url_key
from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.fleet import FleetRig
from pipeline.harness.faults.procs import HarnessError, wait_until
from pipeline.harness.faults.snapshot import crawl_keys, crawl_records, stored_urls
from pipeline.settings import StoreSettings


@dataclass(slots=True)
class Struck:
    fault_t: float
    back_t: float
    recovery_event: Callable[[dict[str, Any]], bool]  # the event that says the crawl got going again
    killed: Killed | None = (
        None  # the struck process and what it had in flight (None: the time window decides)
    )
    # When what the struck process had in flight is known only after the crawl (from the dispatcher's events).
    name_killed: Callable[[FleetRig], Killed] | None = None


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
    the crawl may take after the fault."""
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
    journaled = crawl_keys(rig.out, before=struck.fault_t)  # the journal and the nodes' segments
    acc = account(truth=bed.truth, log=bed.window(start), journaled_at_fault=journaled,
                  stored_urls=stored_urls(rig.out, rig.store), times=FaultTimes(struck.fault_t, struck.back_t, end_t),
                  causes=known_causes(rig),
                  killed=struck.name_killed(rig) if struck.name_killed is not None else struck.killed)  # fmt: skip
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


def known_causes(rig: FleetRig) -> dict[str, set[Key]]:
    """Keys that known, separately pinned bugs fetch twice, from the dispatcher's ``expired`` events.

    - ``expired_answered``: URLs whose result had arrived when their batch expired: the dispatcher
      re-queues the whole batch (tests/faults/test_faults_known_bugs.py pins it);
    - ``expired_unanswered``: URLs not answered yet when their batch expired while its holder was
      alive after all (a stopped worker that resumes, or a dispatcher that wrongly declared a live node
      dead): the holder finishes the batch while the re-issued copy runs elsewhere.
    """
    answered: set[str] = set()
    unanswered: set[str] = set()
    for ev in rig.events():
        if ev["ev"] == "expired":
            left = set(ev.get("unanswered") or ())
            answered |= set(ev.get("urls") or ()) - left
            unanswered |= left
    out: dict[str, set[Key]] = {"expired_answered": set(), "expired_unanswered": set()}
    for r in crawl_records(rig.out):
        url = r.get("url")
        if url in answered:
            out["expired_answered"] |= journaled_keys([r])
        elif url in unanswered:
            out["expired_unanswered"] |= journaled_keys([r])
    return out


# --- strikes -------------------------------------------------------------------------------------------
def strike_worker(rig: FleetRig, plan: TrialPlan) -> Struck:
    node = rig.node(1)
    w = rig.workers[node]
    if plan.action == "kill":
        fault_t = w.kill()
        time.sleep(plan.down_s)
        back_t = time.time()
        rig.start_worker(1)
    else:
        fault_t = w.pause()
        time.sleep(plan.down_s)
        back_t = w.resume()

    def recovered(ev: dict[str, Any]) -> bool:  # its work re-issued, or (holding none) the node back
        return ev.get("node") == node and ev["ev"] in ("expired", "node_up", "node_back")

    return Struck(fault_t, back_t, recovered, name_killed=lambda r: worker_in_flight(r, node, fault_t))


def worker_in_flight(rig: FleetRig, node: str, fault_t: float) -> Killed:
    """What the struck worker itself may have had in flight: the URLs of its batches that the dispatcher
    expired after the fault (on its restart, or when it was declared dead) and that were still
    unanswered then. An expired batch excuses nothing by itself: a URL of it whose answer had arrived
    was done, and fetching it again is a duplicate. A node follows no redirect (``fetchers.redirects``),
    so a chain's later hops are URLs of their own, excused only if they were unanswered themselves."""
    keys: set[Key] = set()
    for ev in rig.events():
        if ev["ev"] == "expired" and ev.get("node") == node and float(ev["t"]) >= fault_t:
            keys |= {url_key(url) for url in ev.get("unanswered") or ()}
    return Killed("worker", frozenset(keys))


def strike_dispatcher(rig: FleetRig, plan: TrialPlan) -> Struck:
    if plan.action == "kill":
        fault_t = rig.dispatcher.kill()
        time.sleep(plan.down_s)
        back_t = time.time()
        rig.start_dispatcher(resume=True)
    else:
        fault_t = rig.dispatcher.pause()
        time.sleep(plan.down_s)
        back_t = rig.dispatcher.resume()
    return Struck(fault_t, back_t, lambda ev: ev["ev"] == "issue", Killed.fetches_nothing("dispatcher"))


def strike_rabbit(rabbit: Any) -> Callable[[FleetRig, TrialPlan], Struck]:
    """``rabbit`` is a pipeline.harness.faults.services.PrivateRabbit the rig's broker URL points at."""

    def strike(rig: FleetRig, plan: TrialPlan) -> Struck:
        if plan.action == "kill":
            fault_t = rabbit.proc.kill()
            time.sleep(plan.down_s)
            back_t = rabbit.restart()
        else:  # the node hangs: connections stay open and go silent
            fault_t = rabbit.proc.pause()
            time.sleep(plan.down_s)
            back_t = rabbit.proc.resume()
        return Struck(fault_t, back_t, lambda ev: ev["ev"] == "done", Killed.fetches_nothing("rabbitmq"))

    return strike


def strike_thrift(thrift: Any) -> Callable[[FleetRig, TrialPlan], Struck]:
    """``thrift`` is a pipeline.harness.faults.services.PrivateThrift the rig's HBase store talks to."""

    def strike(rig: FleetRig, plan: TrialPlan) -> Struck:
        fault_t = thrift.proc.kill() if plan.action == "kill" else thrift.proc.pause()
        time.sleep(plan.down_s)
        back_t = thrift.restart() if plan.action == "kill" else thrift.proc.resume()
        return Struck(fault_t, back_t, lambda ev: ev["ev"] == "done", Killed.fetches_nothing("thrift"))

    return strike


def strike_links(rig: FleetRig, plan: TrialPlan) -> Struck:
    """The link jobs, killed mid-round or stopped, then started again. They
    fetch nothing, so nothing may be fetched twice because of them and nothing may be lost."""
    if plan.action == "kill":
        fault_t = rig.links.kill()
        time.sleep(plan.down_s)
        back_t = time.time()
        rig.start_links()
    else:
        fault_t = rig.links.pause()
        time.sleep(plan.down_s)
        back_t = rig.links.resume()
    return Struck(fault_t, back_t, lambda ev: ev["ev"] == "links", Killed.fetches_nothing("links"))


STRIKES: dict[str, Callable[[FleetRig, TrialPlan], Struck]] = {
    "worker": strike_worker,
    "dispatcher": strike_dispatcher,
    "links": strike_links,
}
