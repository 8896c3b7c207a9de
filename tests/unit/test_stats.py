"""CrawlStats: counting, once-a-second tick rows (deltas vs totals), summary, latency buckets."""

from __future__ import annotations

import json

import pytest

from fetchers.records import FetchResult, Timings
from pipeline.observe.stats import LATENCY_BOUNDS_S, LATENCY_PHASES, CrawlStats, dns_hit_rate


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def ok(url: str = "http://a.test/x", *, status: int = 200, wire: int = 1000, depth: int = 0, fid: str = "f1",
       timings: Timings | None = None) -> FetchResult:
    return FetchResult(url=url, url_id=1, depth=depth, status=status, wire_bytes=wire, fetcher_id=fid,
                       timings=timings or Timings(0.001, 0.002, 0.01, 0.02))


def err(url: str = "http://b.test/y", cls: str = "timeout") -> FetchResult:
    return FetchResult(url=url, url_id=2, depth=1, error_class=cls, fetcher_id="f2")


def test_on_result_counts_pages_failures_bytes_status_and_errors() -> None:
    s = CrawlStats(clock=FakeClock())
    s.on_result(ok())
    s.on_result(ok(status=404, wire=0))  # no wire bytes measured: body bytes stand in (0 here)
    s.on_result(FetchResult(url="http://a.test/z", url_id=3, depth=0, status=200, body_bytes=77))
    s.on_result(err())
    s.on_result(err(cls="dns_nxdomain"))
    assert (s.pages, s.failed, s.bytes) == (3, 2, 1077)
    assert s.status_mix() == {200: 2, 404: 1}
    assert s.errors_by_class() == {"timeout": 1, "dns_nxdomain": 1}
    assert s.fetcher_pages() == {"f1": 2, "": 1, "f2": 2}


def test_latency_buckets_are_fixed_log_buckets_and_skip_unmeasured_phases() -> None:
    s = CrawlStats(clock=FakeClock())
    s.on_result(ok(timings=Timings(0.0, 0.0, 0.05, 0.1)))  # reused connection: no dns/connect
    s.on_result(ok(timings=Timings(1e-5, 0.002, 0.05, 500.0)))  # below the first bound, above the last
    hist = s.latency_histograms()
    assert set(hist) == set(LATENCY_PHASES)
    assert all(len(c) == len(LATENCY_BOUNDS_S) + 1 for c in hist.values())
    assert sum(hist["dns"]) == 1 and hist["dns"][0] == 1
    assert sum(hist["ttfb"]) == 2
    assert hist["total"][-1] == 1  # overflow bucket
    # 0.05 s lands in the first bucket whose bound is >= 0.05
    i = next(i for i, b in enumerate(LATENCY_BOUNDS_S) if b >= 0.05)
    assert hist["ttfb"][i] == 2
    assert s.latency_sums()["total"] == pytest.approx(500.1)


def test_tick_at_most_once_per_wall_second_with_deltas_and_totals() -> None:
    clock = FakeClock(1000.2)
    s = CrawlStats(clock=clock)
    for _ in range(5):
        s.on_result(ok())
    s.on_result(err())
    s.on_discovered(12)
    s.on_robots_blocked()
    s.on_quota_refusal("default", "quota")
    s.set_queue(42)
    s.set_fetchers({"f1": {"n_i": 64, "t_i": 0.02, "live": 1, "p": 50.0, "q": 10}})
    assert s.tick() is None  # same wall second as the start
    clock.t = 1000.9
    assert s.tick() is None
    clock.t = 1001.1
    row = s.tick()
    assert row is not None
    assert s.tick() is None  # once per second
    assert row["pages"] == 5 and row["failed"] == 1 and row["bytes"] == 5000
    assert row["errors"] == {"timeout": 1} and row["status"] == {"200": 5}
    assert row["discovered"] == 12 and row["robots_blocked"] == 1 and row["quota_refusals"] == 1
    assert row["queue"] == 42 and row["fetchers"]["f1"]["n_i"] == 64
    assert row["dt"] == pytest.approx(0.9)
    assert row["totals"]["pages"] == 5
    json.dumps(row)  # a stats.jsonl line
    # Next second: deltas restart, totals keep growing; unchanged classes are left out of the deltas.
    s.on_result(ok())
    clock.t = 1003.5  # a skipped second: dt covers it
    row2 = s.tick()
    assert row2 is not None
    assert row2["pages"] == 1 and row2["failed"] == 0 and row2["errors"] == {}
    assert row2["totals"]["pages"] == 6 and row2["totals"]["failed"] == 1
    assert row2["dt"] == pytest.approx(2.4)


def test_tick_dns_hit_rate_is_per_interval_and_counters_pass_through() -> None:
    clock = FakeClock(10.0)
    s = CrawlStats(clock=clock)
    s.set_dns({"hits": 0, "misses": 10, "negative_hits": 0, "inflight_joins": 0, "evictions": 0})
    clock.t = 11.0
    row = s.tick()
    assert row is not None and row["dns_hit_rate"] == 0.0 and row["dns"]["misses"] == 10
    s.set_dns({"hits": 9, "misses": 11, "negative_hits": 0, "inflight_joins": 0, "evictions": 0})
    clock.t = 12.0
    row = s.tick()
    assert row is not None and row["dns_hit_rate"] == pytest.approx(0.9)
    clock.t = 13.0
    row = s.tick()
    assert row is not None and row["dns_hit_rate"] is None  # no lookups this interval
    assert dns_hit_rate({"hits": 9, "misses": 11}) == pytest.approx(0.45)
    assert dns_hit_rate({}) is None


def test_summary_has_the_contract_keys() -> None:
    clock = FakeClock(100.0)
    s = CrawlStats(clock=clock)
    for i in range(30):
        s.on_result(ok(url=f"http://h{i % 3}.test/{i}", depth=i % 4))
    s.on_result(err())
    s.on_discovered(100)
    s.on_robots_blocked(3)
    s.set_quota_per_s({"default": 40.0})
    clock.t = 110.0
    summary = s.summary()
    for key in ("pages_fetched", "pages_failed", "urls_discovered", "robots_blocked", "bytes", "errors_by_class",
                "status_mix", "elapsed_s", "pages_per_s"):
        assert key in summary
    assert summary["pages_fetched"] == 30 and summary["pages_failed"] == 1
    assert summary["elapsed_s"] == 10.0 and summary["pages_per_s"] == 3.0
    assert summary["hosts"] == 4 and summary["top_hosts_pages"]["h0.test"] == 10
    assert summary["depth"] == {"0": 8, "1": 9, "2": 7, "3": 7}  # err() is at depth 1
    assert summary["quota_per_s"] == {"default": 40.0}
    json.dumps(summary)


def test_gauges_are_copies() -> None:
    s = CrawlStats(clock=FakeClock())
    fetchers = {"f1": {"n_i": 1.0}}
    s.set_fetchers(fetchers)
    fetchers["f1"]["n_i"] = 99.0
    assert s.fetchers()["f1"]["n_i"] == 1.0
    s.fetchers()["f1"]["n_i"] = 5.0
    assert s.fetchers()["f1"]["n_i"] == 1.0


def test_on_result_does_not_grow_state_for_repeated_keys() -> None:
    """The hot path only touches fixed-size counters once every key has been seen."""
    s = CrawlStats(clock=FakeClock())
    r = ok()
    s.on_result(r)
    sizes = (len(s.status_mix()), len(s.fetcher_pages()), [len(c) for c in s.latency_histograms().values()])
    for _ in range(1000):
        s.on_result(r)
    assert sizes == (len(s.status_mix()), len(s.fetcher_pages()), [len(c) for c in s.latency_histograms().values()])
    assert s.pages == 1001
