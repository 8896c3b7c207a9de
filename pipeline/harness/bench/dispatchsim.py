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

S1's admission on the same path: flatsim.py.
"""

from __future__ import annotations

import dataclasses
import heapq
import statistics
from dataclasses import dataclass

import numpy as np

from fetchers.records import Batch, UrlTask
from pipeline.dispatch.admission import second_of_minute
from pipeline.dispatch.dispatcher import Dispatcher
from pipeline.dispatch.memfrontier import MemoryFrontier
from pipeline.dispatch.protocols import FrontierLike, Refusal
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.serials import MemorySerialStore, SerialAllocator
from pipeline.settings import DispatchSettings
from pipeline.transport.dispatcher.nodes import FleetNodes
from pipeline.transport.wire.messages import NodeHeartbeat

T0 = 1_800_000_000.0 - 1_800_000_000.0 % 60  # a minute boundary, so sim second 0 is s = 1
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


def beat(name: str, now: float, *, rate: float, free: int, done: int, incarnation: str = "1") -> NodeHeartbeat:
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
        sim.heard(beat(name, clock.now, rate=speed[name], free=0, done=0))
        push(clock.now + settings.heartbeat_s, name, None, 0)
    dispatch(None)
    while min(len(v) for v in durations.values()) < rounds:
        when, _, name, batch, pages = heapq.heappop(events)
        clock.now = when
        if batch is None:
            sim.heard(beat(name, when, rate=speed[name], free=0, done=done[name]))
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
