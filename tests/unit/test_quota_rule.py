"""S1 rule 2 exactly (refuse, never shrink, unless the explicit deviation), rule 1 (unknown service),
the minute reset of n and every r, and "no quota file = unlimited"; on an injected clock."""

from __future__ import annotations

import logging
import math

import pytest

from fetchers.records import Batch, UrlTask
from pipeline.dispatch import protocols as P
from pipeline.dispatch.admission import Admission, admit
from pipeline.dispatch.dispatcher import Dispatcher
from pipeline.dispatch.memfrontier import MemoryFrontier
from pipeline.dispatch.protocols import Refusal
from pipeline.dispatch.quotas import QuotaError, Quotas
from pipeline.dispatch.serials import MemorySerialStore, SerialAllocator
from pipeline.settings import DispatchSettings

T0 = 1_800_000_000.0 - (1_800_000_000 % 60)  # second 1 of a minute


@pytest.mark.parametrize(
    ("t", "budget", "strict", "shrunk"),
    [(5, 5, 5, 5), (6, 5, 0, 5), (1, 0.9, 0, 0), (0, 10, 0, 0), (64, math.inf, 64, 64), (3, 2, 0, 2)],
)
def test_admit_refuses_over_budget_and_shrinks_only_when_asked(
    t: int, budget: float, strict: int, shrunk: int
) -> None:
    assert admit(t, budget) == strict
    assert admit(t, budget, shrink=True) == shrunk


def test_request_is_at_most_one_seconds_quota() -> None:
    a = Admission(Quotas({"x": 200, "slow": 0.5, "frac": 12.5}))
    assert a.request("x", 64) == 64
    assert a.request("x", 500) == 200
    assert a.request("slow", 64) == 1  # a minute's quota is 30: a request of 64 would be refused for ever
    assert a.request("frac", 64) == 13
    assert Admission(Quotas.unlimited()).request("any", 500) == 500
    assert Admission(Quotas({"x": 200}), shrink=True).request("x", 500) == 500


def test_t_plus_n_over_sm_is_refused_then_admitted_when_the_second_comes() -> None:
    a = Admission(Quotas({"x": 10}))
    now = T0 + 2  # s = 3: s*m = 30
    a.grant("x", "f", 25, now)
    assert a.admitted(6, a.budget("x", now) or 0) == 0  # 6 + 25 > 30: no
    assert a.admitted(5, a.budget("x", now) or 0) == 5  # 5 + 25 == 30: yes
    assert a.wait_s("x", now, t=6) == pytest.approx(1.0)  # at s = 4: 31 + ... fits (6 + 25 <= 40)
    assert a.admitted(6, a.budget("x", now + 1) or 0) == 6


def test_n_and_every_r_reset_at_second_1_of_the_next_minute() -> None:
    a = Admission(Quotas({"x": 10, "y": 1}))
    a.grant("x", "f1", 300, T0 + 40)
    a.grant("y", "f2", 20, T0 + 40)
    assert (a.n("x"), a.n("y"), a.r("f1"), a.r("f2")) == (300, 20, 300, 20)
    assert a.budget("x", T0 + 59.9) == 300
    assert a.budget("x", T0 + 60) == 10  # second 1 of the next minute: n back to 0, no carry-over
    assert (a.n("x"), a.n("y"), a.r("f1"), a.r("f2")) == (0, 0, 0, 0)


def _dispatcher(quotas: Quotas, now: list[float], *, shrink: bool = False, urls: int = 500) -> Dispatcher:
    frontier = MemoryFrontier(per_host=4)
    frontier.add([UrlTask(f"http://h{i % 50}.test/p{i}", i, 0) for i in range(urls)])
    settings = DispatchSettings(k=64, n_min=1, n_max=512, lease_s=0, quota_shrink=shrink)
    return Dispatcher(settings, frontier=frontier, quotas=quotas,
                      serials=SerialAllocator(MemorySerialStore().reserve_serials), clock=lambda: now[0])  # fmt: skip


def test_offer_answers_no_instead_of_a_smaller_batch() -> None:
    now = [T0]
    d = _dispatcher(Quotas({"x": 100}), now)
    d.register("f")
    first = d.offer("f", "x")
    assert isinstance(first, Batch) and len(first.tasks) == 64
    d.complete(first.serial, fetcher_id="f", pages=64, elapsed_s=1.0)
    second = d.offer("f", "x")  # 64 + 64 > 1 * 100: S1 answers no
    assert isinstance(second, Refusal) and second.reason == P.QUOTA and second.retry_after_s > 0
    now[0] = T0 + 1  # s = 2: 128 <= 200
    third = d.offer("f", "x")
    assert isinstance(third, Batch) and len(third.tasks) == 64


def test_shrink_mode_is_the_old_deviation() -> None:
    now = [T0]
    d = _dispatcher(Quotas({"x": 100}), now, shrink=True)
    d.register("f")
    first = d.offer("f", "x")
    assert isinstance(first, Batch)
    d.complete(first.serial, fetcher_id="f", pages=len(first.tasks), elapsed_s=1.0)
    second = d.offer("f", "x")
    assert isinstance(second, Batch) and len(second.tasks) == 100 - len(first.tasks)


def test_the_fleets_path_answers_no_when_the_chosen_nodes_request_is_over() -> None:
    """S1's node choice picks a node (u > t); admission then refuses its t: 64 + 64 > 1 * 100."""
    from pipeline.harness.bench.dispatchsim import SimClock, SimFleet, beat

    clock = SimClock(T0)
    frontier = MemoryFrontier(per_host=4)
    frontier.add([UrlTask(f"http://h{i % 50}.test/p{i}", i, 0) for i in range(500)])
    sim = SimFleet(DispatchSettings(k=64, n_min=1, n_max=512, lease_s=0, service="x"), frontier,
                   Quotas({"x": 100}), clock)  # fmt: skip
    sim.heard(beat("a", T0, rate=500.0, free=200, done=1))
    sim.heard(beat("b", T0, rate=500.0, free=200, done=1))
    got = sim.next()
    assert isinstance(got, Batch) and len(got.tasks) == 64
    refused = sim.next()
    assert isinstance(refused, Refusal) and refused.reason == P.QUOTA and refused.retry_after_s > 0
    clock.now = T0 + 1  # s = 2: 128 <= 200
    assert isinstance(sim.next(), Batch)


def test_unknown_service_is_refused_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    now = [T0]
    d = _dispatcher(Quotas({"x": 100}), now)
    d.register("f")
    with caplog.at_level(logging.ERROR, logger="pipeline.dispatch.dispatcher"):
        for _ in range(3):
            got = d.offer("f", "nope")
            assert isinstance(got, Refusal) and got.reason == P.UNKNOWN_SERVICE
    said = [r for r in caplog.records if "'nope' is not in the quota list" in r.getMessage()]
    assert len(said) == 1
    assert d.snapshot().refusals[P.UNKNOWN_SERVICE] == 3


def test_no_quota_file_is_unlimited_and_a_bad_one_is_an_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    q = Quotas.from_settings_file("")
    assert q.unlimited_all and q.quota("anything") == math.inf
    bad = tmp_path / "q.toml"
    bad.write_text("[services]\nx = -1\n")
    with pytest.raises(QuotaError):
        Quotas.from_settings_file(str(bad))
