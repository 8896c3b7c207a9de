"""Property tests: S1's quota holds for any request sequence on the fleet's decision path (the node
table's choice, then ``offer``) and on ``offer`` alone; serial ids only ever increase."""

from __future__ import annotations

import math
from collections import defaultdict

from hypothesis import event, given, settings
from hypothesis import strategies as st

from fetchers.records import Batch, UrlTask
from pipeline.dispatch.admission import minute_of, second_of_minute
from pipeline.dispatch.memfrontier import MemoryFrontier
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.serials import MemorySerialStore, SerialAllocator
from pipeline.harness.bench.dispatchsim import SimClock, SimFleet, beat
from pipeline.settings import DispatchSettings

T0 = 1_700_000_040.0
NODES = ("a", "b", "c")  # one virtual fetcher each: "a#0", ...

op = st.one_of(
    st.tuples(st.just("advance"), st.one_of(st.floats(0.0, 2.5), st.floats(0.0, 2.5), st.floats(0.0, 70.0))),
    st.tuples(st.just("next"), st.sampled_from(("x", "y", "z", "unknown"))),
    st.tuples(st.just("next"), st.sampled_from(("x", "y", "z"))),
    st.tuples(st.just("offer"), st.sampled_from(NODES), st.sampled_from(("x", "y", "z"))),
    st.tuples(st.just("hb"), st.sampled_from(NODES), st.floats(0, 500), st.integers(0, 500)),
    st.tuples(st.just("complete"), st.integers(0, 50), st.floats(0.01, 30.0)),
    st.tuples(st.just("complete"), st.integers(0, 50), st.floats(0.01, 30.0)),
    st.tuples(st.just("tick")),
)


@settings(max_examples=150, deadline=None)
@given(
    quotas=st.fixed_dictionaries(
        {"x": st.sampled_from([0, 0.3, 1, 2.5, 7, 40]), "y": st.integers(0, 200), "z": st.floats(0, 50)}
    ),
    k=st.integers(1, 80),
    start=st.floats(0.0, 59.99),
    cap=st.integers(1, 3),
    ops=st.lists(op, min_size=20, max_size=150),
)
def test_quota_never_exceeded(
    quotas: dict[str, float], k: int, start: float, cap: int, ops: list[tuple]
) -> None:
    clock = SimClock(T0 + start)
    frontier = MemoryFrontier(per_host=7)
    frontier.add([UrlTask(f"http://h{i % 37}.test/{i}", i) for i in range(3000)])
    sim = SimFleet(DispatchSettings(k=k, n_min=1, n_max=200), frontier, Quotas(quotas), clock, serial_block=3,
                   max_outstanding=cap)  # fmt: skip
    d = sim.d
    for node in NODES:
        sim.heard(beat(node, clock.now, rate=100.0, free=300, done=0))
    granted: dict[tuple[str, int], int] = defaultdict(int)
    out: list[Batch] = []
    last_serial = 0
    for o in ops:
        kind = o[0]
        res = None
        if kind == "advance":
            clock.now += o[1]
        elif kind == "next":  # the fleet dispatcher's step: S1's node choice, then offer
            res = sim.next(o[1])
        elif kind == "offer":
            res = d.offer(f"{o[1]}#0", o[2])
        elif kind == "hb":
            sim.heard(beat(o[1], clock.now, rate=o[2], free=o[3], done=1))
        elif kind == "complete" and out:
            b = out.pop(o[1] % len(out))
            sim.complete(b, pages=len(b.tasks), elapsed_s=o[2])
        elif kind == "tick":
            sim.tick()
        if isinstance(res, Batch):
            assert res.serial > last_serial
            last_serial = res.serial
            assert res.issued_at == clock.now and len(res.tasks) >= 1
            key = (res.service, minute_of(clock.now))
            granted[key] += len(res.tasks)
            # S1 rule 2 at the instant of the grant: n <= s*m (so also <= 60*m over the minute)
            assert granted[key] <= math.floor(second_of_minute(clock.now) * quotas[res.service] + 1e-9)
            assert d.snapshot().fetchers[res.fetcher_id].live  # never to a dead fetcher
            out.append(res)
    event(f"batches granted: {'0' if last_serial == 0 else '1-5' if last_serial <= 5 else '>5'}")
    for (service, _minute), n in granted.items():
        assert n <= 60 * quotas[service] + 1e-9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(0, 25)), min_size=1, max_size=30))
def test_serials_strictly_increasing_across_restarts(runs: list[tuple[int, int]]) -> None:
    store = MemorySerialStore()
    issued: list[int] = []
    for block, count in runs:  # each run is one dispatcher lifetime with its own block size
        alloc = SerialAllocator(store.reserve_serials, block=block)
        issued += [alloc.next() for _ in range(count)]
    assert all(a < b for a, b in zip(issued, issued[1:], strict=False))
