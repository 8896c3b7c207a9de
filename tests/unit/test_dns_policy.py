"""S1/S2 TTL clamping and S4's refresh rule (pure)."""

from __future__ import annotations

import pytest

from pipeline.dns.policy import Freshness, TtlPolicy


def test_clamp_lengthens_short_and_shortens_long() -> None:
    p = TtlPolicy(min_ttl_s=300, max_ttl_s=86400, refresh_period_s=1800)
    assert p.clamp(1) == 300
    assert p.clamp(3600) == 3600
    assert p.clamp(7 * 86400) == 86400
    assert p.clamp(None) == 300


def test_ttl_minutes_round_up_and_fit_uint16() -> None:
    p = TtlPolicy(min_ttl_s=61, max_ttl_s=10**9, refresh_period_s=0)
    assert p.ttl_minutes(1) == 2  # 61 s never becomes 1 minute
    assert p.ttl_minutes(120) == 2
    assert p.ttl_minutes(10**8) == 0xFFFF


def test_refresh_rule_ignores_ttl_within_period() -> None:
    p = TtlPolicy(min_ttl_s=60, max_ttl_s=3600, refresh_period_s=1800)
    ttl_min = p.ttl_minutes(60)  # a 1-minute TTL
    assert p.freshness(0, ttl_min) is Freshness.FRESH
    assert p.freshness(1799, ttl_min) is Freshness.FRESH  # far past the TTL: still served
    assert p.freshness(1800, ttl_min) is Freshness.STALE  # served once, refreshed in background
    assert p.freshness(1859, ttl_min) is Freshness.STALE
    assert p.freshness(1860, ttl_min) is Freshness.EXPIRED


def test_refresh_rule_refreshes_long_ttls_after_period() -> None:
    p = TtlPolicy(min_ttl_s=60, max_ttl_s=86400, refresh_period_s=1800)
    assert p.freshness(1801, p.ttl_minutes(86400)) is Freshness.STALE


def test_plain_ttl_mode_without_refresh_period() -> None:
    p = TtlPolicy(min_ttl_s=60, max_ttl_s=3600, refresh_period_s=0)
    ttl_min = p.ttl_minutes(1)
    assert p.freshness(59, ttl_min) is Freshness.FRESH
    assert p.freshness(60, ttl_min) is Freshness.EXPIRED


def test_bad_policy_rejected() -> None:
    with pytest.raises(ValueError):
        TtlPolicy(min_ttl_s=100, max_ttl_s=10, refresh_period_s=0)

