"""Discrete-time simulations of the fleet dispatcher's decisions, over a ``MemoryFrontier`` (no I/O, no
sleeping): S1's node choice in ``FleetNodes`` (the fleet's node table, fed with ``NodeHeartbeat``s),
then ``Dispatcher.offer`` for the chosen node's idle fetcher -- what ``FleetDispatcher._dispatch`` runs,
without the crawl core's store and the broker. Each node here has one virtual fetcher (``--slots 1``).

``simulate_balance`` (S3): nodes of speeds 1x, 2x, 4x; an idle node is chosen and given a batch at
once. A batch of n pages takes a gamma-distributed time with mean n / speed (per-page jitter, so a
batch's relative jitter shrinks as 1/sqrt(n)). Round r is every node's r-th batch; its spread is max/min
of those batches' durations. ``sizing`` is "n_i" (S3), "equal" (every batch k) or "oracle" (n
proportional to the true speeds, bypassing the dispatcher: the floor that jitter alone leaves).
``drift_at`` makes the fastest node halve its speed from that round on (the vertical comparison).

``simulate_flatness`` (S1): every ``dt`` the dispatcher runs a dispatch round (choose, offer, until S1
or the quota says no); nodes work through their batch at speed x jitter, heartbeat every
``heartbeat_s`` (p = URLs done in the last period / period, q = concurrency - queued URLs) and reply.
One node dies for good, one dies and comes back restarted (a new incarnation) and then delivers the
result of the batch it held. New URLs arrive in bursts (as the link jobs deliver them). Fleet: 1x, 2x,
4x (dies mid-batch for good), 2x (dies mid-batch, comes back), 1x; 1x = ``base_urls_per_s``. URLs per
second dispatched are binned by issue time.
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
from pipeline.dispatch.protocols import FrontierLike, Refusal
from pipeline.dispatch.quotas import Pace, Quotas
from pipeline.dispatch.serials import MemorySerialStore, SerialAllocator
from pipeline.settings import DispatchSettings
from pipeline.transport.fleet_nodes import FleetNodes
from pipeline.transport.messages import NodeHeartbeat

T0 = 1_800_000_000.0 - 1_800_000_000.0 % 60  # a minute boundary, so sim second 0 is s = 1
FLAPS = "f4-2x-flaps"  # the node that dies and comes back in the flatness simulation
S1_NO = "s1_no"  # no node has u > t (and none is drained): the round ends without a batch


class SimClock:
    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def url_stream(start: int, count: int, hosts: int) -> list[UrlTask]:
    return [UrlTask(f"http://h{i % hosts}.sim/p{i}", i, 0) for i in range(start, start + count)]


def make_dispatcher(settings: DispatchSettings, frontier: FrontierLike, quotas: Quotas, clock: SimClock, *,
                    serial_block: int = 256, max_outstanding: int = 1) -> Dispatcher:  # fmt: skip
    serials = SerialAllocator(MemorySerialStore().reserve_serials, block=serial_block)
    return Dispatcher(settings, frontier=frontier, quotas=quotas, serials=serials, clock=clock,
                      max_outstanding=max_outstanding)  # fmt: skip


class SimFleet:
    """The fleet dispatcher's decision path, as ``FleetDispatcher`` drives it, minus the core and the wire."""

    def __init__(self, settings: DispatchSettings, frontier: FrontierLike, quotas: Quotas, clock: SimClock,
                 **dispatcher: int) -> None:  # fmt: skip
        self.settings, self.clock = settings, clock
        self.d = make_dispatcher(settings, frontier, quotas, clock, **dispatcher)
        self.fleet = FleetNodes()
        self.timeout_s = settings.heartbeat_s * settings.missed_heartbeats

    def heard(self, hb: NodeHeartbeat) -> str:
        """A node's heartbeat (``Inbound._on_heartbeat``): a new incarnation (re-)registers its fetchers,
        expiring what the old one held; every fetcher gets its share of p and q. Returns the event."""
        heard = self.fleet.heard(hb, self.clock())
        if heard.event == "node_up":
            for vfid in heard.reregister:
                self.d.register(vfid)
                self.fleet.busy.pop(vfid, None)
        for vfid in heard.node.vfids:
            self.d.heartbeat(hb.for_fetcher(vfid, share=len(heard.node.vfids)))
        return heard.event

    def next(self, service: str | None = None) -> Batch | Refusal:
        """One step of a dispatch round: S1's node choice, then ``offer`` to its idle fetcher."""
        service = service or self.settings.service
        picked = self.fleet.pick(self.d, service, s=second_of_minute(self.clock()))
        if picked is None:
            return Refusal(S1_NO, 1.0)
        res = self.d.offer(picked[1], service)
        if isinstance(res, Batch):
            self.fleet.busy[res.fetcher_id] = res.serial
        return res

    def complete(self, batch: Batch, *, pages: int, elapsed_s: float) -> bool:
        """A node's reply closes its batch (``Inbound._on_results``); False when the dispatcher drops it."""
        if self.fleet.busy.get(batch.fetcher_id) == batch.serial:
            del self.fleet.busy[batch.fetcher_id]
        return self.d.complete(batch.serial, fetcher_id=batch.fetcher_id, pages=pages, elapsed_s=elapsed_s)

    def tick(self) -> list[int]:
        """``Periodic._tick``: the dispatcher's liveness sweep and lease expiry, our side of every batch it
        expired closed, and silent nodes marked dead. Returns the serials expired."""
        expired = self.d.tick()
        out = {b.serial for b in self.d.outstanding()}
        for vfid, serial in list(self.fleet.busy.items()):
            if serial not in out:
                del self.fleet.busy[vfid]
        self.fleet.silent(self.clock(), self.timeout_s)
        return expired


def _beat(name: str, now: float, *, rate: float, free: int, done: int, incarnation: str = "1") -> NodeHeartbeat:
    return NodeHeartbeat(name, incarnation, now, done, 0, rate, free, 1, 0)


# --- S3 balance -------------------------------------------------------------------------------------
@dataclass(slots=True)
class BalanceResult:
    sizing: str
    spreads: list[float]  # per round, max/min batch duration
    n_trace: dict[str, list[tuple[float, int]]]  # node -> (sim time, batch size)
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
    sim = SimFleet(settings, frontier, Quotas.unlimited(), clock)
    names = [f"f{i}-{s:g}x" for i, s in enumerate(speeds)]
    speed = dict(zip(names, (s * base_pages_per_s for s in speeds), strict=True))
    oracle_avg = statistics.fmean(1.0 / v for v in speed.values())
    fastest = max(names, key=lambda n: speed[n])
    durations: dict[str, list[float]] = {n: [] for n in names}
    n_trace: dict[str, list[tuple[float, int]]] = {n: [] for n in names}
    done = dict.fromkeys(names, 0)
    # (time, order, node, batch or None, pages); None = a heartbeat; serial 0 = an oracle batch
    events: list[tuple[float, int, str, Batch | None, int]] = []
    order = 0
    started: dict[str, float] = {}

    def push(when: float, name: str, batch: Batch | None, pages: int) -> None:
        nonlocal order
        order += 1
        heapq.heappush(events, (when, order, name, batch, pages))

    def begin(name: str, batch: Batch, pages: int) -> None:
        shape = 1.0 / page_cv**2  # sum of n gamma(shape, mean/shape) pages = gamma(n*shape, mean/shape)
        took = float(rng.gamma(pages * shape, (1.0 / speed[name]) / shape))
        n_trace[name].append((clock.now - T0, pages))
        push(clock.now + took, name, batch, pages)
        started[name] = clock.now

    def dispatch(name: str | None) -> None:
        """A dispatch round: every idle node S1 chooses gets a batch. The oracle bypasses the dispatcher:
        exact k * avg / t with the true speeds, what jitter alone leaves."""
        if sizing == "oracle":
            for n in names if name is None else [name]:
                begin(n, Batch(0, f"{n}#0", []), round(settings.k * oracle_avg * speed[n]))
            return
        while isinstance(res := sim.next(), Batch):
            begin(res.fetcher_id.partition("#")[0], res, len(res.tasks))

    for name in names:
        sim.heard(_beat(name, clock.now, rate=speed[name], free=0, done=0))
        push(clock.now + settings.heartbeat_s, name, None, 0)
    dispatch(None)
    while min(len(v) for v in durations.values()) < rounds:
        when, _, name, batch, pages = heapq.heappop(events)
        clock.now = when
        if batch is None:
            sim.heard(_beat(name, when, rate=speed[name], free=0, done=done[name]))
            push(when + settings.heartbeat_s, name, None, 0)
            continue
        took = when - started[name]
        durations[name].append(took)
        done[name] += pages
        if batch.serial:
            sim.complete(batch, pages=pages, elapsed_s=took)
        if drift_at is not None and name == fastest and len(durations[name]) == drift_at:
            speed[name] /= 2.0
        dispatch(name)
        if name not in started or started[name] != clock.now:
            raise RuntimeError(f"simulation starved: {name} got no batch")
    spreads = [max(d_[r] for d_ in durations.values()) / min(d_[r] for d_ in durations.values())
               for r in range(rounds)]  # fmt: skip
    return BalanceResult(sizing, spreads, n_trace, durations)


# --- S1 flatness ------------------------------------------------------------------------------------
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
                sim.heard(_beat(n.name, clock.now, rate=n.last_rate, free=n.concurrency, done=n.done,
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
                    sim.heard(_beat(n.name, clock.now, rate=rate, free=n.concurrency - queued, done=n.done,
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
