"""Fault trial on S1's quota: the fleet dispatcher SIGKILLed while a quota minute is half used.

The crawl's service gets a quota of ``per_s`` URLs per second (S1: at most floor(60 * per_s) URLs
granted per minute, unused seconds carried over within the minute). The crawl starts early enough
in a minute that a seeded share (about half) of that minute's quota reaches the testbed, and the
dispatcher killed there is back (``--resume``) within the same minute. A dispatcher that forgot what
its predecessor granted this minute would grant the minute's quota once more.

Judged from the testbed's access log: the URLs requested in each calendar minute (robots.txt,
redirect hops and the fetcher's retries after a 5xx left out: S1 grants URLs, and those are the same
URL's fetch) never exceed the minute's quota. The crawl starts in a minute of its own, so no grant of an earlier minute reaches
the testbed in it, and the minutes after the first hold only what is left of a small web. Also
judged as every fault trial: no page lost, and no repeat excused (the dispatcher fetches nothing).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.harness.faults.accounting import ROBOTS, Key, Strike, account, url_key
from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.fleet import FleetRig
from pipeline.harness.faults.procs import HarnessError, wait_until
from pipeline.harness.faults.snapshot import stored_urls

# The crawl must start by this second of a minute, so that half the quota is used and the dispatcher
# is back (recovery takes a few seconds) before the minute ends.
LATEST_START_S = 25


def minute_of(t: float) -> int:
    return int(t // 60)


def granted_requests(entries: list[dict[str, Any]], hops: set[Key]) -> list[dict[str, Any]]:
    """Access-log entries that S1 counts: a URL's request, without robots.txt, redirect hops, and the
    fetcher's own retries after a 5xx (accounting counts those as one fetch too)."""
    out: list[dict[str, Any]] = []
    retry_next: set[Key] = set()
    for e in sorted(entries, key=lambda e: float(e["t"])):
        k = (str(e["host"]), str(e["path"]))
        if k[1] == ROBOTS or k in hops:
            continue
        if k not in retry_next:
            out.append(e)
        status = int(e.get("status", 0))
        if 500 <= status < 600 and status != 501:
            retry_next.add(k)
        else:
            retry_next.discard(k)
    return out


def per_minute(entries: list[dict[str, Any]]) -> dict[int, int]:
    return dict(sorted(Counter(minute_of(float(e["t"])) for e in entries).items()))


def quota_trial(bed: Bed, broker_url: str, workdir: Path, plan: TrialPlan, *, per_s: float) -> dict[str, Any]:
    quotas = workdir / "quotas.toml"
    workdir.mkdir(parents=True, exist_ok=True)
    rig = FleetRig(bed, broker_url, workdir, extra_env={"CRAWLFLEET_DISPATCH_QUOTAS_FILE": str(quotas)})
    quotas.write_text(f"[services]\n{rig.service} = {per_s}\n")
    per_min = math.floor(60 * per_s + 1e-9)
    hops = {url_key(u) for u in bed.truth.get("redirect_hops", ())}
    try:
        rig.start_worker(1)
        rig.start_worker(2)
        now = time.time()
        if now % 60 > LATEST_START_S:
            time.sleep(60 - now % 60 + 0.2)  # into the next minute
        start = time.time()
        rig.start_dispatcher()
        target = max(1, int(per_min * plan.at_fraction))

        def half_used() -> bool:
            if not rig.dispatcher.running:
                raise HarnessError(f"the dispatcher exited before the fault point:\n{rig.dispatcher.log_tail()}")
            return len(granted_requests(bed.window(start), hops)) >= target

        wait_until(half_used, timeout_s=120, what=f"{target} granted URLs at the testbed")
        fault_t = rig.dispatcher.kill()
        time.sleep(plan.down_s)
        back_t = time.time()
        rig.start_dispatcher(resume=True)
        wait_until(lambda: rig.first_event_after(back_t, lambda ev: ev["ev"] == "issue") is not None
                   or not rig.dispatcher.running, timeout_s=120, what="the resumed dispatcher's first batch")  # fmt: skip
        issued = rig.first_event_after(back_t, lambda ev: ev["ev"] == "issue")
        summary = rig.wait_dispatcher()
        end_t = time.time()
    finally:
        rig.close()
    bed.settle()
    log = bed.window(start)
    counts = per_minute(granted_requests(log, hops))
    acc = account(truth=bed.truth, log=log, stored_urls=stored_urls(rig.out, rig.store),
                  strike=Strike("dispatcher", "SIGKILL", fault_t, back_t, end_t=end_t))  # fmt: skip
    if issued is not None:
        acc.recovery_s = round(issued - fault_t, 3)
    same_minute = issued is not None and minute_of(issued) == minute_of(fault_t)
    return {
        "type": "fault", "mode": "fleet, quota minute half used", "component": "dispatcher", "action": "kill",
        "seed": plan.seed,
        "at_fraction": plan.at_fraction, "fault_after_requests": target, "down_s": plan.down_s,
        "wall_s": round(end_t - start, 3), **acc.to_json(),
        "quota": {"per_s": per_s, "per_minute": per_min, "granted_per_minute": {str(k): v for k, v in counts.items()},
                  "max_minute": max(counts.values(), default=0), "fault_minute": minute_of(fault_t),
                  "resumed_in_fault_minute": same_minute,
                  "first_issue_after_restart_s_of_minute": round(issued % 60, 2) if issued else None},
        "summary": {"pages_fetched": summary.get("pages_fetched"), "pages_failed": summary.get("pages_failed"),
                    "quota_refusals": summary.get("quota_refusals"), "fleet": summary.get("fleet")},
    }  # fmt: skip
