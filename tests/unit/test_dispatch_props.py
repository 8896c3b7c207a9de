"""Property tests: S1's quota holds for any request sequence; serial ids only ever increase."""

from __future__ import annotations

import math
from collections import defaultdict

from hypothesis import event, given, settings
from hypothesis import strategies as st

from fetchers.records import Batch, UrlTask
from pipeline.dispatch.admission import minute_of, second_of_minute
from pipeline.dispatch.dispatcher import Dispatcher
from pipeline.dispatch.memfrontier import MemoryFrontier
from pipeline.dispatch.protocols import Heartbeat
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.serials import MemorySerialStore, SerialAllocator
from pipeline.settings import DispatchSettings

T0 = 1_700_000_040.0
FETCHERS = ("a", "b", "c")

op = st.one_of(
    st.tuples(st.just("advance"), st.one_of(st.floats(0.0, 2.5), st.floats(0.0, 2.5), st.floats(0.0, 70.0))),
    st.tuples(st.just("next"), st.sampled_from(("x", "y", "z", "unknown"))),
    st.tuples(st.just("next"), st.sampled_from(("x", "y", "z"))),
    st.tuples(st.just("offer"), st.sampled_from(FETCHERS), st.sampled_from(("x", "y", "z"))),
    st.tuples(st.just("hb"), st.sampled_from(FETCHERS), st.floats(0, 500), st.integers(0, 500)),
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
    now = [T0 + start]
    frontier = MemoryFrontier(per_host=7)
    frontier.add([UrlTask(f"http://h{i % 37}.test/{i}", i) for i in range(3000)])
    d = Dispatcher(DispatchSettings(k=k, n_min=1, n_max=200), frontier=frontier, quotas=Quotas(quotas),
                   serials=SerialAllocator(MemorySerialStore().reserve_serials, block=3),
                   clock=lambda: now[0], max_outstanding=cap)  # fmt: skip
    for fid in FETCHERS:
        d.heartbeat(Heartbeat(fid, now[0], 0, 0, 100.0, 300))
    granted: dict[tuple[str, int], int] = defaultdict(int)
    out: list[Batch] = []
    last_serial = 0
    for o in ops:
        kind = o[0]
        res = None
        if kind == "advance":
            now[0] += o[1]
        elif kind == "next":
            res = d.next_batch(o[1])
        elif kind == "offer":
            res = d.offer(o[1], o[2])
        elif kind == "hb":
            d.heartbeat(Heartbeat(o[1], now[0], 0, 0, o[2], o[3]))
        elif kind == "complete" and out:
            b = out.pop(o[1] % len(out))
            d.complete(b.serial, fetcher_id=b.fetcher_id, pages=len(b.tasks), elapsed_s=o[2])
        elif kind == "tick":
            d.tick()
        if isinstance(res, Batch):
            assert res.serial > last_serial
            last_serial = res.serial
            assert res.issued_at == now[0] and len(res.tasks) >= 1
            key = (res.service, minute_of(now[0]))
            granted[key] += len(res.tasks)
            # S1 rule 2 at the instant of the grant: n <= s*m (so also <= 60*m over the minute)
            assert granted[key] <= math.floor(second_of_minute(now[0]) * quotas[res.service] + 1e-9)
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


choice_op = st.one_of(
    st.tuples(st.just("advance"), st.one_of(st.floats(0.0, 1.5), st.floats(0.0, 5.0))),
    st.tuples(st.just("next")),
    st.tuples(st.just("next")),
    st.tuples(st.just("hb"), st.integers(0, 7), st.floats(0, 300), st.integers(0, 300)),
    st.tuples(st.just("complete"), st.integers(0, 50), st.floats(0.01, 10.0)),
    st.tuples(st.just("tick")),
)


@settings(max_examples=150, deadline=None)
@given(
    quota=st.sampled_from([3.0, 40.0, 500.0]),
    k=st.integers(1, 120),
    cap=st.integers(1, 2),
    ops=st.lists(choice_op, min_size=10, max_size=120),
)
def test_indexed_choice_equals_brute_force_rule(quota: float, k: int, cap: int, ops: list[tuple]) -> None:
    """The heap index picks exactly the fetcher S1's rule picks by scanning every live fetcher."""
    from pipeline.dispatch.admission import Admission, Candidate

    now = [T0 + 17.0]
    frontier = MemoryFrontier(per_host=4)
    frontier.add([UrlTask(f"http://h{i % 1500}.test/{i}", i) for i in range(6000)])
    d = Dispatcher(DispatchSettings(k=k, n_min=1, n_max=150, lease_s=0), frontier=frontier,
                   quotas=Quotas({"x": quota}), serials=SerialAllocator(MemorySerialStore().reserve_serials),
                   clock=lambda: now[0], max_outstanding=cap)  # fmt: skip
    out: list[Batch] = []
    for o in ops:
        if o[0] == "advance":
            now[0] += o[1]
        elif o[0] == "hb":
            d.heartbeat(Heartbeat(f"f{o[1]}", now[0], 0, 0, o[2], o[3]))
        elif o[0] == "complete" and out:
            b = out.pop(o[1] % len(out))
            d.complete(b.serial, fetcher_id=b.fetcher_id, pages=len(b.tasks), elapsed_s=o[2])
        elif o[0] == "tick":
            d.tick()
        elif o[0] == "next":
            snap = d.snapshot()
            budget = math.floor(snap.second * quota + 1e-9) - (snap.services["x"].n if "x" in snap.services else 0)
            cands = [Candidate(f.fetcher_id, f.p, f.q, f.n) for f in snap.fetchers.values()
                     if f.live and f.outstanding < cap]  # fmt: skip
            ref = Admission(Quotas({"x": quota}))
            for f in snap.fetchers.values():
                ref._r[f.fetcher_id] = f.r  # the same r as the dispatcher's
            ref._minute = minute_of(now[0])
            expected = ref.choose(cands, budget, now[0], service="x") if budget >= 1 else None
            res = d.next_batch("x")
            if isinstance(res, Batch):
                assert expected is not None and res.fetcher_id == expected.fetcher_id
                assert len(res.tasks) <= expected.t
                out.append(res)
                event("indexed choice: granted")
            else:
                assert expected is None or res.reason == "empty", (res, expected)
