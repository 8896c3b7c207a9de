"""The reference frontier's contract, and short deterministic simulations of the fleet's decision path
(``FleetNodes`` choice + ``Dispatcher.offer``, simulated time only)."""

from __future__ import annotations

from fetchers.records import Batch, UrlTask
from pipeline.dispatch.memfrontier import MemoryFrontier, _host
from pipeline.dispatch.protocols import Refusal
from pipeline.dispatch.quotas import Quotas
from pipeline.harness.bench.dispatchsim import (
    S1_NO,
    SimClock,
    SimFleet,
    beat,
    simulate_balance,
    url_stream,
)
from pipeline.harness.bench.flatsim import simulate_flatness
from pipeline.settings import DispatchSettings


def test_host_of() -> None:
    assert _host("http://User@Example.COM:8080/a?b#c") == "example.com"
    assert _host("https://[::1]:443/x") == "::1"
    assert _host("http://a.test?q") == "a.test"


def test_memory_frontier_host_leases() -> None:
    f = MemoryFrontier(per_host=2)
    f.add([UrlTask(f"http://{h}.test/{i}", n) for n, (h, i) in enumerate((h, i) for h in "abc" for i in range(3))])
    assert f.available(0.0) == 9
    assert f.add([UrlTask("http://a.test/0", 0)]) == 0 and f.is_pending(0)  # already pending: not twice
    got = f.lease("x", 3, 0.0)
    assert [t.url for t in got] == ["http://a.test/0", "http://a.test/1", "http://b.test/0"]
    assert f.leased_hosts("x") == {"a.test", "b.test"} and f.available(0.0) == 3  # only c is free
    assert [t.url for t in f.lease("y", 10, 0.0)] == ["http://c.test/0", "http://c.test/1"]
    assert f.lease("z", 10, 0.0) == []  # every host with URLs is leased
    f.requeue("x", got[:1] + got[:1])  # once, even if named twice
    assert f.pending() == 5  # 9 - 5 leased + 1 back
    f.release("x", 1.0, host_delays={"a.test": 5.0})
    assert f.available(1.0) == 2 and f.available(6.0) == 4  # b now, a after its delay
    urls = [t.url for t in f.lease("z", 10, 6.0)]
    assert urls == ["http://b.test/1", "http://b.test/2", "http://a.test/0", "http://a.test/2"]  # re-queued first
    assert not f.is_pending(0)


def test_sim_fleet_runs_the_fleets_choice_then_offer() -> None:
    """The node with the largest u = p*s + q - r gets the batch, through its idle virtual fetcher; a busy
    node is no candidate; a node's restart expires what its old incarnation held."""
    clock = SimClock()
    frontier = MemoryFrontier(per_host=8)
    frontier.add(url_stream(0, 500, 50))
    sim = SimFleet(DispatchSettings(k=16, n_min=1, n_max=64), frontier, Quotas.unlimited(), clock)
    assert sim.heard(beat("slow", clock.now, rate=10.0, free=50, done=0)) == "node_up"
    sim.heard(beat("fast", clock.now, rate=100.0, free=50, done=0))
    first = sim.next()
    assert isinstance(first, Batch) and first.fetcher_id == "fast#0" and len(first.tasks) == 16
    second = sim.next()  # fast is busy (its only fetcher holds a batch)
    assert isinstance(second, Batch) and second.fetcher_id == "slow#0"
    third = sim.next()
    assert isinstance(third, Refusal) and third.reason == S1_NO
    assert sim.complete(first, pages=16, elapsed_s=0.5)
    assert sim.heard(beat("slow", clock.now, rate=10.0, free=50, done=0, incarnation="2")) == "node_up"
    assert not sim.complete(second, pages=16, elapsed_s=0.5)  # its serial died with the old incarnation
    assert sim.d.snapshot().dropped == {"expired": 1} and frontier.pending() == 500 - 32 + 16


def test_balance_sim_n_i_vs_equal() -> None:
    n_i = simulate_balance(sizing="n_i", rounds=12)
    equal = simulate_balance(sizing="equal", rounds=12)
    assert sorted(n_i.spreads[6:])[3] <= 1.10  # median of the steady rounds
    assert min(equal.spreads) >= 3.0
    sizes = {name: trace[-1][1] for name, trace in n_i.n_trace.items()}
    assert sizes["f0-1x"] < sizes["f1-2x"] < sizes["f2-4x"]


def test_flatness_sim_quota_holds_and_nothing_is_lost() -> None:
    r = simulate_flatness(quota=200.0, duration_s=120, die_at=30, flap_down=50, flap_up=80)
    s = r.summary()
    assert s["cv"] <= 0.10 and s["max_minute_over_quota"] <= 0 and s["cum_over_budget"] <= 0
    assert s["batches_to_dead"] == 0 and s["lost_urls"] == 0 and s["duplicate_urls"] == 0
    assert any("comes back" in what for _, what in r.events)
    assert any("late result" in what and "dropped" in what for _, what in r.events)
    assert s["per_node_urls"]["f4-2x-flaps"] > 0 and s["requeued_urls"] > 0


def test_flatness_sim_without_the_pace_still_never_exceeds_the_quota() -> None:
    """S1's rule alone (no [pace]) is lumpier per second but holds t + n <= s*m at every grant."""
    s = simulate_flatness(quota=200.0, duration_s=120, die_at=30, flap_down=50, flap_up=80, paced=False).summary()
    assert s["max_minute_over_quota"] <= 0 and s["cum_over_budget"] <= 0
    assert s["lost_urls"] == 0 and s["duplicate_urls"] == 0 and s["batches_to_dead"] == 0
