"""S1's quota admission simulated on the fleet's decision path (``dispatchsim.SimFleet``: the node
table's choice, then ``Dispatcher.offer``), over a ``MemoryFrontier``, in simulated time.

``simulate_flatness`` (S1): every ``dt`` the dispatcher runs a dispatch round (choose, offer, until S1
or the quota says no); nodes work through their batch at speed x jitter, heartbeat every
``heartbeat_s`` (p = URLs done in the last period / period, q = concurrency - queued URLs) and reply.
One node dies for good, one dies and comes back restarted (a new incarnation) and then delivers the
result of the batch it held. New URLs arrive in bursts (as the link jobs deliver them). Fleet: 1x, 2x,
4x (dies mid-batch for good), 2x (dies mid-batch, comes back), 1x; 1x = ``base_urls_per_s``. URLs per
second dispatched are binned by issue time.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fetchers.records import Batch
from pipeline.dispatch.admission import minute_of, second_of_minute
from pipeline.dispatch.memfrontier import MemoryFrontier
from pipeline.dispatch.quotas import Pace, Quotas
from pipeline.harness.bench.dispatchsim import T0, SimClock, SimFleet, beat, url_stream
from pipeline.settings import DispatchSettings

FLAPS = "f4-2x-flaps"  # the node that dies and comes back


@dataclass(slots=True)
class _SimNode:
    name: str
    speed: float  # URLs/s
    concurrency: int
    batch: Batch | None = None
    done_in_batch: float = 0.0
    done_period: float = 0.0
    busy_period: float = 0.0  # seconds of the last period during which it had a batch
    last_rate: float = 0.0
    done: int = 0  # URLs done in its life (the heartbeat's successes)
    incarnation: int = 1
    alive: bool = True
    started: float = 0.0


@dataclass(slots=True)
class FlatnessResult:
    quota: float | None
    per_second: list[int]  # URLs dispatched in sim second i
    events: list[tuple[float, str]]  # (sim time, what happened)
    minute_totals: list[int]
    cum_over_budget: int  # max over seconds of (granted so far this minute - floor(s*m)); <= 0 is good
    to_dead: int  # batches issued to a node the dispatcher had declared dead
    after_death: int  # batches issued to a node after it actually died (before detection)
    lost_urls: int
    duplicate_urls: int  # URLs completed twice
    dropped_completions: int
    requeued_urls: int
    per_node_urls: dict[str, int] = field(default_factory=dict)
    refusals: dict[str, int] = field(default_factory=dict)

    def summary(self, *, skip_s: int = 5) -> dict[str, Any]:
        body = self.per_second[skip_s:]
        mean = statistics.fmean(body)
        cv = statistics.pstdev(body) / mean if mean else 0.0
        return {
            "quota_per_s": self.quota, "mean_per_s": round(mean, 2), "cv": round(cv, 4),
            "min_per_s": min(body), "max_per_s": max(body), "minute_totals": self.minute_totals,
            "max_minute_over_quota": (max(self.minute_totals) - 60 * self.quota) if self.quota else None,
            "cum_over_budget": self.cum_over_budget if self.quota else None,
            "batches_to_dead": self.to_dead, "batches_after_real_death": self.after_death,
            "lost_urls": self.lost_urls, "duplicate_urls": self.duplicate_urls,
            "dropped_completions": self.dropped_completions, "requeued_urls": self.requeued_urls,
            "per_node_urls": self.per_node_urls, "refusals": self.refusals,
        }  # fmt: skip


def simulate_flatness(
    *,
    quota: float | None = 200.0,
    duration_s: int = 600,
    dt: float = 0.05,
    base_urls_per_s: float = 60.0,
    jitter: float = 0.3,
    seed_urls: int = 40_000,
    burst_urls: int = 20_000,
    burst_every_s: float = 60.0,
    die_at: float = 150.0,
    flap_down: float = 240.0,
    flap_up: float = 330.0,
    rate_mode: str = "busy",
    paced: bool = True,
    settings: DispatchSettings | None = None,
    seed: int = 2,
) -> FlatnessResult:
    """``rate_mode`` is how nodes measure the p they report: "busy" = URLs per second while they had
    work (their speed), "wall" = URLs per second of the whole period (lower when the quota idles them).
    ``paced``: the quota is spent as a quota file's default ``[pace]`` spends it (``Pace()``), else by
    S1's rule alone (``Pace.off()``)."""
    settings = settings or DispatchSettings(service="crawl")
    rng = np.random.default_rng(seed)
    clock = SimClock()
    frontier = MemoryFrontier(per_host=16)
    frontier.add(url_stream(0, seed_urls, 4000))
    next_id, next_burst = seed_urls, burst_every_s
    pace = Pace() if paced else Pace.off()
    quotas = Quotas.unlimited() if quota is None else Quotas({settings.service: quota}, pace=pace)
    sim = SimFleet(settings, frontier, quotas, clock)
    fleet = [_SimNode(n, m * base_urls_per_s, 256) for n, m in
             (("f1-1x", 1), ("f2-2x", 2), ("f3-4x-dies", 4), (FLAPS, 2), ("f5-1x", 1))]  # fmt: skip
    by_name = {n.name: n for n in fleet}
    death = {"f3-4x-dies": die_at, FLAPS: flap_down}
    events: list[tuple[float, str]] = []
    per_second = [0] * duration_s
    per_node = {n.name: 0 for n in fleet}
    completed: dict[int, int] = {}
    issued_ids: set[int] = set()
    to_dead = after_death = 0
    granted_minute: dict[int, int] = {}
    cum_over = -(10**9)
    next_hb = 0.0
    for step in range(int(duration_s / dt)):
        t = step * dt
        clock.now = T0 + t
        if t >= next_burst:  # the link jobs deliver a burst of new URLs
            frontier.add(url_stream(next_id, burst_urls, 4000), now=clock.now)
            next_id += burst_urls
            next_burst += burst_every_s
        for n in fleet:
            dying = n.name in death and t >= death[n.name] and (n.batch is not None or t >= death[n.name] + 5)
            if n.alive and dying and not (n.name == FLAPS and t >= flap_up):  # dies mid-batch if it can
                n.alive = False
                events.append((t, f"{n.name} dies"))
            elif not n.alive and n.name == FLAPS and t >= flap_up:
                n.alive, n.incarnation, old = True, n.incarnation + 1, n.batch
                sim.heard(beat(n.name, clock.now, rate=n.last_rate, free=n.concurrency, done=n.done,
                                incarnation=str(n.incarnation)))  # fmt: skip
                events.append((t, f"{n.name} comes back"))
                if old is not None:  # it also delivers the result of the batch it held: must drop
                    ok = sim.complete(old, pages=len(old.tasks), elapsed_s=1.0)
                    events.append((t, f"late result for serial {old.serial} {'accepted' if ok else 'dropped'}"))
                n.batch = None
        if t >= next_hb:
            for n in fleet:
                if n.alive:
                    queued = len(n.batch.tasks) - int(n.done_in_batch) if n.batch else 0
                    if rate_mode == "wall":
                        rate = n.done_period / settings.heartbeat_s
                    else:  # keep the last busy rate through an idle period
                        rate = n.done_period / n.busy_period if n.busy_period > 0 else n.last_rate
                    n.last_rate = rate
                    sim.heard(beat(n.name, clock.now, rate=rate, free=n.concurrency - queued, done=n.done,
                                    incarnation=str(n.incarnation)))  # fmt: skip
                    n.done_period = n.busy_period = 0.0
            next_hb += settings.heartbeat_s
        for serial in sim.tick():
            events.append((t, f"serial {serial} expired"))
        while isinstance(res := sim.next(), Batch):  # a dispatch round
            n = by_name[res.fetcher_id.partition("#")[0]]
            if not sim.d.is_live(res.fetcher_id) or sim.fleet.nodes[n.name].dead:
                to_dead += 1
            per_second[int(t)] += len(res.tasks)
            per_node[n.name] += len(res.tasks)
            issued_ids.update(x.url_id for x in res.tasks)
            minute = minute_of(clock.now)
            granted_minute[minute] = granted_minute.get(minute, 0) + len(res.tasks)
            if quota is not None:
                over = granted_minute[minute] - int(second_of_minute(clock.now) * quota + 1e-9)
                cum_over = max(cum_over, over)
            if not n.alive:
                after_death += 1
                continue  # sent into the void; liveness expires it and re-queues its URLs
            n.batch, n.done_in_batch, n.started = res, 0.0, clock.now
        for n in fleet:
            if not n.alive or n.batch is None:
                continue
            work = n.speed * dt * float(rng.uniform(1 - jitter, 1 + jitter))
            n.done_in_batch += work
            n.done_period += work
            n.busy_period += dt
            if n.done_in_batch >= len(n.batch.tasks):
                b, n.batch = n.batch, None
                n.done += len(b.tasks)
                if sim.complete(b, pages=len(b.tasks), elapsed_s=clock.now + dt - n.started):
                    for x in b.tasks:
                        completed[x.url_id] = completed.get(x.url_id, 0) + 1
    snap = sim.d.snapshot()
    outstanding = {x.url_id for b in sim.d.outstanding() for x in b.tasks}
    lost = len(issued_ids - set(completed) - outstanding) - _still_pending(frontier, issued_ids, completed)
    return FlatnessResult(
        quota=quota, per_second=per_second, events=events,
        minute_totals=[granted_minute[m] for m in sorted(granted_minute)],
        cum_over_budget=cum_over, to_dead=to_dead, after_death=after_death, lost_urls=lost,
        duplicate_urls=sum(1 for c in completed.values() if c > 1),
        dropped_completions=snap.duplicates_dropped, requeued_urls=snap.requeued_urls,
        per_node_urls=per_node, refusals=snap.refusals,
    )  # fmt: skip


def _still_pending(frontier: MemoryFrontier, issued: set[int], completed: dict[int, int]) -> int:
    """Issued-but-not-completed URLs that are back in the frontier (re-queued, not yet re-issued)."""
    return sum(1 for i in issued - set(completed) if frontier.is_pending(i))
