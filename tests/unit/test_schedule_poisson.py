"""The Poisson re-crawl policy (#23 point 8): change-rate estimator, freshness-optimal interval, the
per-host marginal value that spends a budget, and Schedule.plan under ``policy = "poisson"``. Pure."""

from __future__ import annotations

import math

import pytest

from pipeline.frontier.schedule import (
    Change,
    Observation,
    Schedule,
    change_rate,
    expected_freshness,
    exposure,
    optimal_interval,
    revisit_rate,
    solve_mu,
)
from pipeline.settings.recrawl import RecrawlSettings

T0 = 100.0


def poisson(**kw: object) -> Schedule:
    cfg = RecrawlSettings(enabled=True, policy="poisson", initial_interval_s=T0, min_interval_s=5.0,
                          max_interval_s=5000.0, **kw)  # type: ignore[arg-type]  # fmt: skip
    return Schedule(cfg)


def test_change_rate_is_the_censored_exponential_estimate_with_a_floor() -> None:
    assert change_rate(0, 0, 10.0) == 0.0  # nothing observed
    assert change_rate(2, 4, 10.0) == pytest.approx(2 / 40.0)  # X changes over n x mean exposure
    assert change_rate(0, 4, 10.0) == pytest.approx(0.5 / 50.0)  # none seen: half a change, not zero
    rates = [change_rate(x, 6, 10.0) for x in range(1, 7)]
    assert rates == sorted(rates) and len(set(rates)) == 6


def test_exposure_uses_last_modified_only_inside_the_interval() -> None:
    assert exposure(100.0, changed=False, fetched_at=1000.0, modified_at=990.0) == 100.0
    assert (
        exposure(100.0, changed=True, fetched_at=1000.0, modified_at=990.0) == 10.0
    )  # the new version's age
    assert exposure(100.0, changed=True, fetched_at=1000.0, modified_at=1000.0) == 1e-3  # within the second
    assert exposure(100.0, changed=True, fetched_at=1000.0, modified_at=0.0) == 50.0  # no header: half
    assert exposure(100.0, changed=True, fetched_at=1000.0, modified_at=800.0) == 50.0  # stale header
    assert exposure(100.0, changed=True, fetched_at=1000.0, modified_at=1500.0) == 50.0  # server clock ahead
    # the estimate from half-interval exposures is close to the Poisson rate behind a change share p
    for p in (0.2, 0.5):
        n, interval = 100, 10.0
        x = round(p * n)
        mean = (x * interval / 2 + (n - x) * interval) / n
        assert change_rate(x, n, mean) == pytest.approx(-math.log(1 - p) / interval, rel=0.05)


def test_optimal_interval_solves_the_marginal_condition_and_is_u_shaped() -> None:
    mu = 20.0
    for rate in (1e-4, 1e-3, 1e-2, 0.04):
        interval = optimal_interval(rate, mu)
        x = rate * interval
        assert 1 - (1 + x) * math.exp(-x) == pytest.approx(mu * rate, rel=1e-9)
    slow, medium, fast = optimal_interval(1e-4, mu), optimal_interval(1e-2, mu), optimal_interval(0.045, mu)
    assert medium < slow and medium < fast  # revisit most the pages changing about as fast as we can follow
    assert optimal_interval(0.05, mu) == math.inf  # mu x rate >= 1: not worth chasing at all
    assert optimal_interval(0.0, mu) == math.inf  # never changes


def test_expected_freshness() -> None:
    assert expected_freshness(0.0, 10.0) == 1.0
    assert expected_freshness(0.1, math.inf) == 0.0
    assert expected_freshness(1.0, 1.0) == pytest.approx(1 - math.exp(-1))


def test_solve_mu_spends_the_budget_and_defaults_when_all_pages_are_new() -> None:
    rates = [(1e-3, 10), (1e-2, 10), (1.0, 5)]
    mu = solve_mu(rates, 0.2, low=1.0, high=1e5)
    spent = sum(n / min(max(optimal_interval(r, mu), 1.0), 1e5) for r, n in rates)
    assert spent == pytest.approx(0.2, rel=1e-3)
    assert optimal_interval(1.0, mu) == math.inf  # the fast pages are given up for the others
    # 20 pages all at the prior rate 1/T0, budget 20/T0: each comes back after T0, as uniform would
    mu0 = solve_mu([(1 / T0, 20)], 20 / T0, low=1.0, high=1e5)
    assert optimal_interval(1 / T0, mu0) == pytest.approx(T0, rel=1e-6)
    assert mu0 == pytest.approx(poisson().default_mu, rel=1e-6)
    # a budget beyond what the shortest intervals need: the smallest mu; below what the longest need: the largest
    assert optimal_interval(1e-3, solve_mu([(1e-3, 1)], 10.0, low=1.0, high=1e5)) <= 1.0
    assert optimal_interval(1e-3, solve_mu([(1e-3, 10)], 1e-6, low=1.0, high=1e5)) > 1e5


def fetch(s: Schedule, prev, at: float, *, digest: str, status: int = 200, mu: float | None = None,  # type: ignore[no-untyped-def]
          modified_at: float = 0.0):  # fmt: skip
    obs = Observation(fetched_at=at, status=status, digest=digest, etag='"e"', modified_at=modified_at)
    return s.plan(prev, obs, url="http://h/", host="h", mu=mu)


def test_poisson_plan_tracks_history_and_gives_up_on_pages_too_fast_to_follow() -> None:
    s = poisson()
    change, rv = fetch(s, None, 1000.0, digest="d0")
    assert change is Change.NEW and rv.next_fetch == 1000.0 + T0 and rv.fetches == 1
    change, rv = fetch(s, rv, 1100.0, digest="d1")
    assert (
        change is Change.CHANGED and rv.interval == 50.0 and rv.next_fetch == 1100.0 + T0
    )  # 1 < min_observations
    t, rv_blind, rv_dated = 1100.0, rv, rv
    for k in range(2, 8):
        t += 100.0
        _, rv_blind = fetch(s, rv_blind, t, digest=f"d{k}")  # no Last-Modified: changed somewhere in each
        _, rv_dated = fetch(s, rv_dated, t, digest=f"d{k}", modified_at=t - 1.0)  # changed a second ago
    assert rv_blind.changes == 7 and rv_blind.interval == pytest.approx(50.0)
    assert revisit_rate(rv_blind) == pytest.approx(7 / (7 * 50.0))
    # the server says each version is a second old: a rate no revisit here can follow; given up
    assert revisit_rate(rv_dated) > 0.1 and rv_dated.next_fetch == t + 5000.0
    # without Last-Modified the same history still says "follow it", sooner than T0
    assert 5.0 <= rv_blind.next_fetch - t < T0
    # with a tight budget (large mu) it is given up too
    assert fetch(s, rv_blind, t + 100.0, digest="d9", mu=200.0)[1].next_fetch == t + 100.0 + 5000.0
    # the same history, never changed: long, but not given up
    _, rv_slow = fetch(s, None, 1000.0, digest="same")
    t = 1000.0
    for _ in range(7):
        t += 100.0
        _, rv_slow = fetch(s, rv_slow, t, digest="same")
    assert rv_slow.changes == 0 and T0 < rv_slow.next_fetch - t < 5000.0


def test_poisson_plan_uses_the_callers_mu_and_a_304_keeps_validators() -> None:
    s = poisson()
    _, rv = fetch(s, None, 0.0, digest="a")
    _, rv = fetch(s, rv, 100.0, digest="b")
    _, rv = fetch(s, rv, 200.0, digest="a")  # two changes in two intervals
    wait_small_mu = fetch(s, rv, 300.0, digest="", status=304, mu=1.0)[1].next_fetch - 300.0
    change, rv304 = fetch(s, rv, 300.0, digest="", status=304, mu=30.0)
    assert change is Change.NOT_MODIFIED and rv304.digest == "a" and rv304.etag == '"e"'
    assert rv304.changes == 2 and rv304.fetches == 4
    assert rv304.next_fetch - 300.0 > wait_small_mu  # a larger mu (tighter budget) waits longer here


def test_failed_fetch_under_poisson_keeps_the_state() -> None:
    s = poisson()
    _, rv = fetch(s, None, 0.0, digest="a")
    change, after = s.plan(rv, Observation(fetched_at=50.0, status=0, failed=True), url="http://h/", host="h")
    assert change is Change.FAILED and after.fetches == rv.fetches and after.digest == "a"


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="policy"):
        Schedule(RecrawlSettings(policy="random"))


def test_nutch_stays_the_default() -> None:
    assert RecrawlSettings().policy == "nutch" and not Schedule(RecrawlSettings()).poisson
