"""When every name fails, the configuration is wrong: the crawl stops instead of failing its queue."""

from __future__ import annotations

from pipeline.crawl.dnsguard import GUARD, DnsBurst, Probe, judge


def test_one_host_that_resolves_is_enough_to_go_on() -> None:
    assert judge([Probe("a.test", "nxdomain"), Probe("b.test")], resolver="the system resolver") is None
    assert judge([], resolver="the system resolver") is None


def test_every_host_failing_dns_names_them_and_the_resolver() -> None:
    probes = [Probe(f"site{i}.crawl.test", "nxdomain") for i in range(5)]
    why = judge(probes, resolver="the system resolver")
    assert why is not None and "\n" not in why
    assert "site0.crawl.test (nxdomain)" in why and "and 2 more" in why and "the system resolver" in why
    assert "--dns-server" in why


def test_every_host_refused_by_the_guard_says_allow_network() -> None:
    why = judge([Probe("a.test", GUARD, "127.0.0.1: loopback")], resolver="x")
    assert why is not None and "127.0.0.1: loopback" in why and "--allow-network" in why


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_burst_across_hosts_trips_and_a_page_in_between_does_not() -> None:
    clock = Clock()
    burst = DnsBurst(clock, window_s=10.0, min_results=6, min_hosts=3)
    for i in range(6):
        burst.observe(f"h{i % 3}", "dns_nxdomain")
        clock.t += 0.1
    assert burst.tripped() and burst.hosts() == ["h0", "h1", "h2"]
    burst.observe("h9", "")  # a page came back: DNS works for someone
    assert not burst.tripped()


def test_one_dead_host_does_not_trip_and_old_failures_expire() -> None:
    clock = Clock()
    burst = DnsBurst(clock, window_s=10.0, min_results=6, min_hosts=3)
    for _ in range(20):
        burst.observe("dead.test", "dns_nxdomain")
    assert not burst.tripped()  # one host: its own problem, not the configuration's
    for i in range(6):
        burst.observe(f"h{i}", "dns_timeout")
    assert burst.tripped()
    clock.t += 11.0
    assert not burst.tripped()


def test_other_errors_are_not_dns_failures() -> None:
    clock = Clock()
    burst = DnsBurst(clock, window_s=10.0, min_results=3, min_hosts=3)
    for i in range(3):
        burst.observe(f"h{i}", "connect_error")
    assert not burst.tripped()
