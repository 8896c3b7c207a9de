"""Discrete-time simulations of the real ``Dispatcher`` over a ``MemoryFrontier`` (no I/O, no sleeping).

``simulate_balance`` (S3): fetchers of speeds 1x, 2x, 4x ask for work when idle (``offer``). A batch of
n pages takes a gamma-distributed time with mean n / speed (per-page jitter, so a batch's relative
jitter shrinks as 1/sqrt(n)). Round r is every fetcher's r-th batch; its spread is max/min of those
batches' durations. ``sizing`` is "n_i" (S3), "equal" (every batch k) or "oracle" (n proportional to the
true speeds: the floor that jitter alone leaves). ``drift_at`` makes the fastest fetcher halve its speed
from that round on, to show the vertical comparison's reaction time.

``simulate_flatness`` (S1): a client asks ``next_batch`` in a loop every ``dt``; fetchers work through
their batch at speed x jitter, heartbeat every ``heartbeat_s`` (p = URLs done in the last period / period,
q = concurrency - queued URLs) and complete. One fetcher dies for good, one dies and comes back. New URLs
arrive in bursts (as link extraction delivers them). Fleet: 1x, 2x, 4x (dies mid-batch for good),
2x (dies mid-batch, comes back restarted and delivers its stale result), 1x; 1x = ``base_urls_per_s``. URLs per second dispatched are binned by issue time.
"""

from __future__ import annotations

import dataclasses
import heapq
import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fetchers.records import Batch, UrlTask
from pipeline.dispatch.admission import minute_of, second_of_minute
from pipeline.dispatch.dispatcher import Dispatcher
from pipeline.dispatch.memfrontier import MemoryFrontier
from pipeline.dispatch.protocols import FrontierLike, Heartbeat
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.serials import MemorySerialStore, SerialAllocator
from pipeline.settings import DispatchSettings

T0 = 1_800_000_000.0 - 1_800_000_000.0 % 60  # a minute boundary, so sim second 0 is s = 1
FLAPS = "f4-2x-flaps"  # the fetcher that dies and comes back in the flatness simulation


class SimClock:
    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def url_stream(start: int, count: int, hosts: int) -> list[UrlTask]:
    return [UrlTask(f"http://h{i % hosts}.sim/p{i}", i, 0) for i in range(start, start + count)]


def make_dispatcher(
    settings: DispatchSettings, frontier: FrontierLike, quotas: Quotas, clock: SimClock
) -> Dispatcher:
    serials = SerialAllocator(MemorySerialStore().reserve_serials, block=256)
    return Dispatcher(settings, frontier=frontier, quotas=quotas, serials=serials, clock=clock)


# --- S3 balance -------------------------------------------------------------------------------------
@dataclass(slots=True)
class BalanceResult:
    sizing: str
    spreads: list[float]  # per round, max/min batch duration
    n_trace: dict[str, list[tuple[float, int]]]  # fetcher -> (sim time, batch size)
    durations: dict[str, list[float]]

    def summary(self, *, warmup: int = 1) -> dict[str, float]:
        steady = self.spreads[warmup:] or self.spreads
        return {
            "round0_spread": round(self.spreads[0], 4),
            "median_spread": round(statistics.median(steady), 4),
            "p90_spread": round(float(np.percentile(steady, 90)), 4),
            "max_spread": round(max(steady), 4),
            "rounds": len(self.spreads),
        }


def simulate_balance(
    *,
    sizing: str = "n_i",
    speeds: tuple[float, ...] = (1.0, 2.0, 4.0),
    base_pages_per_s: float = 20.0,
    page_cv: float = 0.25,
    rounds: int = 40,
    settings: DispatchSettings | None = None,
    drift_at: int | None = None,
    seed: int = 1,
) -> BalanceResult:
    settings = settings or DispatchSettings()
    if sizing == "equal":
        settings = dataclasses.replace(settings, n_min=settings.k, n_max=settings.k)
    rng = np.random.default_rng(seed)
    clock = SimClock()
    frontier = MemoryFrontier(per_host=32)
    frontier.add(url_stream(0, int(sum(speeds) * settings.n_max * (rounds + 2)), 5000))
    d = make_dispatcher(settings, frontier, Quotas.unlimited(), clock)
    names = [f"f{i}-{s:g}x" for i, s in enumerate(speeds)]
    speed = dict(zip(names, (s * base_pages_per_s for s in speeds), strict=True))
    oracle_avg = statistics.fmean(1.0 / v for v in speed.values())
    fastest = max(names, key=lambda n: speed[n])
    durations: dict[str, list[float]] = {n: [] for n in names}
    n_trace: dict[str, list[tuple[float, int]]] = {n: [] for n in names}
    # (time, order, fetcher, serial, pages); serial -1 = heartbeat, 0 = oracle batch (no dispatcher)
    events: list[tuple[float, int, str, int, int]] = []
    order = 0

    def push(when: float, name: str, serial: int, pages: int) -> None:
        nonlocal order
        order += 1
        heapq.heappush(events, (when, order, name, serial, pages))

    def start(name: str) -> None:
        if sizing == "oracle":  # exact k * avg / t with the true speeds: what jitter alone leaves
            serial, pages = 0, round(settings.k * oracle_avg * speed[name])
        else:
            res = d.offer(name, settings.service)
            if not isinstance(res, Batch):
                raise RuntimeError(f"simulation starved: {res}")
            serial, pages = res.serial, len(res.tasks)
        shape = 1.0 / page_cv**2  # sum of n gamma(shape, mean/shape) pages = gamma(n*shape, mean/shape)
        took = float(rng.gamma(pages * shape, (1.0 / speed[name]) / shape))
        n_trace[name].append((clock.now - T0, pages))
        push(clock.now + took, name, serial, pages)
        started[name] = clock.now

    started: dict[str, float] = {}
    for name in names:
        d.register(name)
    for name in names:
        start(name)
        push(clock.now + settings.heartbeat_s, name, -1, 0)
    while min(len(v) for v in durations.values()) < rounds:
        when, _, name, serial, pages = heapq.heappop(events)
        clock.now = when
        if serial < 0:
            d.heartbeat(Heartbeat(name, when, 0, 0, speed[name], 0))
            push(when + settings.heartbeat_s, name, -1, 0)
            continue
        took = when - started[name]
        durations[name].append(took)
        if serial:
            d.complete(serial, fetcher_id=name, pages=pages, elapsed_s=took)
        if drift_at is not None and name == fastest and len(durations[name]) == drift_at:
            speed[name] /= 2.0
        start(name)
    spreads = [max(d_[r] for d_ in durations.values()) / min(d_[r] for d_ in durations.values())
               for r in range(rounds)]  # fmt: skip
    return BalanceResult(sizing, spreads, n_trace, durations)


# --- S1 flatness ------------------------------------------------------------------------------------
@dataclass(slots=True)
class _SimFetcher:
    name: str
    speed: float  # URLs/s
    concurrency: int
    batch: Batch | None = None
    done_in_batch: float = 0.0
    done_period: float = 0.0
    busy_period: float = 0.0  # seconds of the last period during which it had a batch
    last_rate: float = 0.0
    alive: bool = True
    started: float = 0.0


@dataclass(slots=True)
class FlatnessResult:
    quota: float | None
    per_second: list[int]  # URLs dispatched in sim second i
    events: list[tuple[float, str]]  # (sim time, what happened)
    minute_totals: list[int]
    cum_over_budget: int  # max over seconds of (granted so far this minute - floor(s*m)); <= 0 is good
    to_dead: int  # batches issued to a fetcher the dispatcher had declared dead
    after_death: int  # batches issued to a fetcher after it actually died (before detection)
    lost_urls: int
    duplicate_urls: int  # URLs completed twice
    dropped_completions: int
    requeued_urls: int
    per_fetcher_urls: dict[str, int] = field(default_factory=dict)
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
            "per_fetcher_urls": self.per_fetcher_urls, "refusals": self.refusals,
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
    settings: DispatchSettings | None = None,
    seed: int = 2,
) -> FlatnessResult:
    """``rate_mode`` is how fetchers measure the p they report: "busy" = URLs per second while they had
    work (their speed), "wall" = URLs per second of the whole period (lower when the quota idles them)."""
    settings = settings or DispatchSettings(service="crawl")
    service = settings.service
    rng = np.random.default_rng(seed)
    clock = SimClock()
    frontier = MemoryFrontier(per_host=16)
    frontier.add(url_stream(0, seed_urls, 4000))
    next_id, next_burst = seed_urls, burst_every_s
    quotas = Quotas.unlimited() if quota is None else Quotas({service: quota})
    d = make_dispatcher(settings, frontier, quotas, clock)
    fleet = [_SimFetcher(n, m * base_urls_per_s, 256) for n, m in
             (("f1-1x", 1), ("f2-2x", 2), ("f3-4x-dies", 4), ("f4-2x-flaps", 2), ("f5-1x", 1))]  # fmt: skip
    by_name = {f.name: f for f in fleet}
    death = {"f3-4x-dies": die_at, FLAPS: flap_down}
    events: list[tuple[float, str]] = []
    per_second = [0] * duration_s
    per_fetcher = {f.name: 0 for f in fleet}
    completed: dict[int, int] = {}
    issued_ids: set[int] = set()
    to_dead = after_death = 0
    granted_minute: dict[int, int] = {}
    cum_over = -(10**9)
    next_hb = 0.0
    steps = int(duration_s / dt)
    for step in range(steps):
        t = step * dt
        clock.now = T0 + t
        if t >= next_burst:  # link extraction delivers a burst of new URLs
            frontier.add(url_stream(next_id, burst_urls, 4000), now=clock.now)
            next_id += burst_urls
            next_burst += burst_every_s
        for f in fleet:
            dying = f.name in death and t >= death[f.name] and (f.batch is not None or t >= death[f.name] + 5)
            if f.alive and dying and not (f.name == FLAPS and t >= flap_up):  # dies mid-batch if it can
                f.alive = False
                events.append((t, f"{f.name} dies"))
            elif not f.alive and f.name == FLAPS and t >= flap_up:
                d.register(f.name)
                events.append((t, f"{f.name} comes back"))
                if f.batch is not None:  # it also delivers the result of the batch it held: must drop
                    ok = d.complete(f.batch.serial, fetcher_id=f.name, pages=len(f.batch.tasks), elapsed_s=1.0)
                    events.append((t, f"late result for serial {f.batch.serial} {'accepted' if ok else 'dropped'}"))
                f.alive, f.batch = True, None
        if t >= next_hb:
            for f in fleet:
                if f.alive:
                    queued = len(f.batch.tasks) - int(f.done_in_batch) if f.batch else 0
                    if rate_mode == "wall":
                        rate = f.done_period / settings.heartbeat_s
                    else:  # keep the last busy rate through an idle period
                        rate = f.done_period / f.busy_period if f.busy_period > 0 else f.last_rate
                    f.last_rate = rate
                    d.heartbeat(Heartbeat(f.name, clock.now, 0, 0, rate, f.concurrency - queued))
                    f.done_period = f.busy_period = 0.0
            next_hb += settings.heartbeat_s
        for serial in d.tick():
            events.append((t, f"serial {serial} expired"))
        # the client asks until refused
        while True:
            res = d.next_batch(service)
            if not isinstance(res, Batch):
                break
            f = by_name[res.fetcher_id]
            if not d.is_live(f.name):
                to_dead += 1
            per_second[int(t)] += len(res.tasks)
            per_fetcher[f.name] += len(res.tasks)
            issued_ids.update(x.url_id for x in res.tasks)
            minute = minute_of(clock.now)
            granted_minute[minute] = granted_minute.get(minute, 0) + len(res.tasks)
            if quota is not None:
                over = granted_minute[minute] - int(second_of_minute(clock.now) * quota + 1e-9)
                cum_over = max(cum_over, over)
            if not f.alive:
                after_death += 1
                continue  # sent into the void; liveness expires it and re-queues its URLs
            f.batch, f.done_in_batch, f.started = res, 0.0, clock.now
        for f in fleet:
            if not f.alive or f.batch is None:
                continue
            work = f.speed * dt * float(rng.uniform(1 - jitter, 1 + jitter))
            f.done_in_batch += work
            f.done_period += work
            f.busy_period += dt
            if f.done_in_batch >= len(f.batch.tasks):
                b, f.batch = f.batch, None
                if d.complete(b.serial, fetcher_id=f.name, pages=len(b.tasks), elapsed_s=clock.now + dt - f.started):
                    for x in b.tasks:
                        completed[x.url_id] = completed.get(x.url_id, 0) + 1
    snap = d.snapshot()
    outstanding = {x.url_id for b in d.outstanding() for x in b.tasks}
    lost = len(issued_ids - set(completed) - outstanding) - _still_pending(frontier, issued_ids, completed)
    return FlatnessResult(
        quota=quota, per_second=per_second, events=events,
        minute_totals=[granted_minute[m] for m in sorted(granted_minute)],
        cum_over_budget=cum_over, to_dead=to_dead, after_death=after_death, lost_urls=lost,
        duplicate_urls=sum(1 for c in completed.values() if c > 1),
        dropped_completions=snap.duplicates_dropped, requeued_urls=snap.requeued_urls,
        per_fetcher_urls=per_fetcher, refusals=snap.refusals,
    )  # fmt: skip


def _still_pending(frontier: MemoryFrontier, issued: set[int], completed: dict[int, int]) -> int:
    """Issued-but-not-completed URLs that are back in the frontier (re-queued, not yet re-issued)."""
    return sum(1 for i in issued - set(completed) if frontier.is_pending(i))
