"""The reference frontier's contract and short, deterministic simulations (simulated time only)."""

from __future__ import annotations

from fetchers.records import UrlTask
from pipeline.dispatch.candidates import CandidateIndex
from pipeline.dispatch.memfrontier import MemoryFrontier, _host
from pipeline.dispatch.sim import simulate_balance, simulate_flatness


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


def test_candidate_index_order_versions_and_retry() -> None:
    idx = CandidateIndex()
    idx.rebuild(100, [("a", 5.0), ("b", 9.0), ("c", 9.0)])
    idx.put("a", 10.0)  # re-keyed: the old entry is stale
    seen: list[str] = []

    def accept(fid: str, u: float) -> str:
        seen.append(fid)
        return {"a": "retry", "b": "drop"}.get(fid, "yes")

    assert idx.choose(accept) == ("c", 9.0)
    assert seen == ["a", "b", "c"]  # max u first, ties by id; stale a(5) never offered
    assert "a" in idx and "b" not in idx and "c" not in idx


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
    assert s["per_fetcher_urls"]["f4-2x-flaps"] > 0 and s["requeued_urls"] > 0
