"""The client's pacing of an S1 quota (``[pace]`` in the quota file): requests of a slice of a second's
quota, grants held to a token bucket, and S1's bound t + n <= s*m never broken; on an injected clock."""

from __future__ import annotations

import math
import random

import pytest

from pipeline.dispatch.admission import Admission, second_of_minute
from pipeline.dispatch.quotas import Pace, QuotaError, Quotas

T0 = 1_800_000_000.0 - (1_800_000_000 % 60)  # second 1 of a minute


def test_a_quota_file_paces_by_default_and_code_built_quotas_do_not() -> None:
    assert Quotas.from_mapping({"services": {"x": 200}}).pace == Pace()
    assert Quotas({"x": 200}).pace == Pace.off()
    q = Quotas.from_mapping({"services": {"x": 200}, "pace": {"slice_s": 0.1, "burst_s": 0}})
    assert q.pace == Pace(0.1, 0.0)


@pytest.mark.parametrize("pace", [{"slice_s": -1}, {"burst_s": "1"}, {"slice_s": math.nan}, {"other": 1}, 3])
def test_a_bad_pace_table_is_refused(pace: object) -> None:
    with pytest.raises(QuotaError):
        Quotas.from_mapping({"services": {"x": 1}, "pace": pace})


def test_a_request_is_one_slice_of_a_second() -> None:
    a = Admission(Quotas({"x": 200, "slow": 4}, pace=Pace(0.2, 0.5)))
    assert a.request("x", 500) == 40
    assert a.request("x", 16) == 16
    assert a.request("slow", 64) == 1  # ceil(0.8)
    assert Admission(Quotas({"x": 200})).request("x", 500) == 200  # no pace: one second's quota


def test_the_bucket_holds_grants_to_a_steady_line_within_s1s_bound() -> None:
    a = Admission(Quotas({"x": 200}, pace=Pace(0.2, 0.5)))
    assert a.budget("x", T0) == 100  # the bucket's cap (half a second), not S1's 200
    a.grant("x", "f", 40, T0)
    a.grant("x", "f", 40, T0)
    assert a.budget("x", T0) == pytest.approx(20)
    assert a.budget("x", T0 + 0.1) == pytest.approx(40)  # refilled at 200/s
    assert a.wait_s("x", T0 + 0.1, t=60) == pytest.approx(0.1)
    # A dip is not made up at once: after 10 idle seconds the bucket is at its cap, S1 would allow 2,000.
    assert a.budget("x", T0 + 10.5) == pytest.approx(100)


def test_without_pace_the_budget_is_s1s() -> None:
    a = Admission(Quotas({"x": 200}))
    assert a.budget("x", T0) == 200
    assert a.budget("x", T0 + 10.5) == 2200


def test_paced_grants_never_break_s1_and_stay_near_the_line() -> None:
    """A client asking greedily at random instants: every grant keeps t + n <= s*m, and no second gets
    more than m plus the bucket's cap (S1 alone would allow a whole minute's carry-over)."""
    rng = random.Random(19)
    m = 200.0
    a = Admission(Quotas({"x": m}, pace=Pace(0.2, 0.5)))
    now, per_second = T0, dict[int, int]()
    while now < T0 + 180:
        now += rng.expovariate(40.0) if rng.random() < 0.999 else rng.uniform(2, 8)  # mostly busy, some dips
        budget = a.budget("x", now)
        assert budget is not None
        t = a.admitted(a.request("x", 64), budget)
        if t:
            assert t + a.n("x") <= second_of_minute(now) * m + 1e-9
            a.grant("x", "f", t, now)
            per_second[int(now)] = per_second.get(int(now), 0) + t
    assert max(per_second.values()) <= m + 100 + 40
    assert sum(per_second.values()) > 0.8 * 180 * m
