"""S2 negative cache: Bloom filter cleared wholesale every TTL, on an injected clock."""

from __future__ import annotations

import socket

from pipeline.dns.negative import NegativeCache
from tests.fixtures.dns import FakeClock


def test_failure_remembered_until_wholesale_clear() -> None:
    clock = FakeClock()
    neg = NegativeCache(capacity=10_000, fp_rate=1e-6, ttl_s=300, clock=clock)
    neg.add("nx.example.com", socket.AF_INET, "nxdomain")
    clock.advance(200)
    neg.add("slow.example.com", socket.AF_INET, "timeout")
    assert neg.get("nx.example.com", socket.AF_INET) == "nxdomain"
    assert neg.get("slow.example.com", socket.AF_INET) == "timeout"
    assert neg.get("nx.example.com", socket.AF_INET6) is None  # per family
    assert neg.get("fine.example.com", socket.AF_INET) is None
    clock.advance(100)  # 300 s since the filter started: everything goes at once (S2)
    assert neg.get("nx.example.com", socket.AF_INET) is None
    assert neg.get("slow.example.com", socket.AF_INET) is None
    assert neg.clears == 1


def test_clears_stay_periodic() -> None:
    clock = FakeClock()
    neg = NegativeCache(capacity=100, fp_rate=1e-3, ttl_s=10, clock=clock)
    clock.advance(25)  # two periods and a half, unobserved
    neg.add("a.test", socket.AF_INET, "servfail")
    clock.advance(4.9)  # the period that began at 20 ends at 30
    assert neg.get("a.test", socket.AF_INET) == "servfail"
    clock.advance(0.2)
    assert neg.get("a.test", socket.AF_INET) is None


def test_kind_label_falls_back_to_nxdomain_when_forgotten() -> None:
    clock = FakeClock()
    neg = NegativeCache(capacity=1000, fp_rate=1e-6, ttl_s=300, clock=clock, labels_max=2)
    for i in range(3):
        neg.add(f"h{i}.test", socket.AF_INET, "timeout")
    assert neg.get("h0.test", socket.AF_INET) == "nxdomain"
    assert neg.get("h2.test", socket.AF_INET) == "timeout"


def test_size_at_s2_scale_is_computed_without_inserting() -> None:
    # 1e8 names at 1e-6 false positives: S2 says about 350 MB.
    assert NegativeCache.size_for(100_000_000, 1e-6) <= 350 * 2**20
