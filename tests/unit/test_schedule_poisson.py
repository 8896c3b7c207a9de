"""The Poisson re-crawl policy: change-rate estimator (pipeline.frontier.changerate), freshness-optimal
interval, the per-host marginal value that spends a budget, and Schedule.plan under ``policy = "poisson"``.
Pure."""

from __future__ import annotations

import math

import pytest

from pipeline.frontier.changerate import (
    LM_NOW_S,
    PRIOR_CHANGES,
    STATIC_SHARE,
    advance,
    exposure,
    first_window,
    lm_follows,
    rate_of,
    revisit_rate,
)
from pipeline.frontier.schedule import (
    Change,
    Observation,
    Schedule,
    expected_freshness,
    optimal_interval,
    solve_mu,
)
from pipeline.harness.testbed.validators import http_date
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Revisit

T0 = 100.0
PRIOR = 1 / T0
NOW = 1_700_000_000.0


def poisson(**kw: object) -> Schedule:
    cfg = RecrawlSettings(enabled=True, policy="poisson", initial_interval_s=T0, min_interval_s=5.0,
                          max_interval_s=5000.0, **kw)  # type: ignore[arg-type]  # fmt: skip
    return Schedule(cfg)


def test_rate_with_changes_is_the_censored_exponential_estimate_with_the_prior() -> None:
    b = PRIOR_CHANGES / PRIOR
    assert rate_of(2, 40.0, PRIOR) == pytest.approx((2 + PRIOR_CHANGES) / (40.0 + b))
    assert rate_of(200, 4000.0, PRIOR) == pytest.approx(0.05, rel=0.02)  # much data: the prior fades
    rates = [rate_of(x, 60.0, PRIOR) for x in range(1, 7)]
    assert rates == sorted(rates) and len(set(rates)) == 6


def test_a_page_never_seen_changing_is_worth_its_chance_of_changing_at_all() -> None:
    # nothing observed: the prior share of pages that never change halves the prior rate
    assert rate_of(0, 0.0, PRIOR) == pytest.approx(PRIOR * (1 - STATIC_SHARE))
    quiet = [rate_of(0, e, PRIOR) for e in (0.0, 100.0, 1_000.0, 10_000.0, 100_000.0)]
    assert quiet == sorted(quiet, reverse=True)
    # a year of exposure without a change: far below the plain (X + a) / (E + b) of a changing page
    assert rate_of(0, 100_000.0, PRIOR) < 0.1 * PRIOR_CHANGES / (100_000.0 + PRIOR_CHANGES / PRIOR)
    assert rate_of(1, 100_000.0, PRIOR) > 10 * rate_of(0, 100_000.0, PRIOR)  # one change seen: it changes


def test_exposure_uses_last_modified_only_inside_the_interval() -> None:
    assert exposure(100.0, changed=False, fetched_at=1000.0, modified_at=990.0) == 100.0
    assert (
        exposure(100.0, changed=True, fetched_at=1000.0, modified_at=990.0) == 10.0
    )  # the new version's age
    assert exposure(100.0, changed=True, fetched_at=1000.0, modified_at=1000.0) == 1e-3  # within the second
    assert exposure(100.0, changed=True, fetched_at=1000.0, modified_at=0.0) == 50.0  # no header: half
    assert exposure(100.0, changed=True, fetched_at=1000.0, modified_at=800.0) == 50.0  # stale header
    assert exposure(100.0, changed=True, fetched_at=1000.0, modified_at=1500.0) == 50.0  # server clock ahead


def state(at: float, lm: float | None, *, fetches: int = 1, changes: int = 0, interval: float = 0.0) -> Revisit:
    return Revisit(0.0, interval, last_modified=http_date(lm) if lm else "", changes=changes, fetches=fetches,
                   fetched_at=at)  # fmt: skip


def test_the_first_window_is_the_last_modified_age_when_it_is_believable() -> None:
    assert first_window(state(NOW, NOW - 86_400)) == pytest.approx(86_400)
    assert first_window(state(NOW, NOW)) == 0.0  # "generated now": nothing said
    assert first_window(state(NOW, NOW - LM_NOW_S + 1)) == 0.0
    assert first_window(state(NOW, None)) == 0.0  # no header
    assert first_window(state(NOW, NOW - 86_400, fetches=2)) == 0.0  # counted (or dropped) by then
    # before the second fetch the estimate already uses it: a page unchanged for a year is slow
    assert revisit_rate(state(NOW, NOW - 365 * 86_400), PRIOR) < 0.01 * revisit_rate(state(NOW, NOW - 60), PRIOR)


def test_last_modified_follows_when_it_moves_exactly_with_the_content() -> None:
    assert lm_follows(NOW - 100, NOW - 100, changed=False)
    assert lm_follows(NOW - 100, NOW - 10, changed=True)
    assert not lm_follows(NOW - 100, NOW - 10, changed=False)  # a date line or an advert moved it
    assert not lm_follows(NOW - 100, NOW - 100, changed=True)  # the text changed under a stale date
    assert not lm_follows(0.0, NOW, changed=True) and not lm_follows(NOW, 0.0, changed=False)


def test_advance_counts_the_first_window_only_once_the_header_proved_itself() -> None:
    first = state(NOW, NOW - 5_000)
    # unchanged, header unchanged: the 5,000 s before the first fetch count, with the 100 s window
    assert advance(first, fetched_at=NOW + 100, modified_at=NOW - 5_000, changed=False) == (0, 5_100.0)
    # changed, header dates the new version 30 s back: exact age, and the first window
    assert advance(first, fetched_at=NOW + 100, modified_at=NOW + 70, changed=True) == (1, 5_030.0)
    # the header moved but the content did not (a date line): the first window is dropped
    assert advance(first, fetched_at=NOW + 100, modified_at=NOW + 50, changed=False) == (0, 100.0)
    # later windows add their own exposure only
    later = state(NOW, NOW - 5_000, fetches=3, changes=1, interval=300.0)
    assert advance(later, fetched_at=NOW + 100, modified_at=NOW - 5_000, changed=False) == (1, 400.0)
    assert advance(None, fetched_at=NOW, modified_at=NOW - 5, changed=False) == (0, 0.0)


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
    assert optimal_interval(1 / T0, mu0) == pytest.approx(T0, rel=1e-5)
    assert mu0 == pytest.approx(poisson().default_mu, rel=1e-5)
    # a budget beyond what the shortest intervals need: the smallest mu; below what the longest need: the largest
    assert optimal_interval(1e-3, solve_mu([(1e-3, 1)], 10.0, low=1.0, high=1e5)) <= 1.0
    assert optimal_interval(1e-3, solve_mu([(1e-3, 10)], 1e-6, low=1.0, high=1e5)) > 1e5


def fetch(s: Schedule, prev, at: float, *, digest: str, status: int = 200, mu: float | None = None,  # type: ignore[no-untyped-def]
          modified_at: float = 0.0):  # fmt: skip
    obs = Observation(fetched_at=at, status=status, digest=digest, etag='"e"', modified_at=modified_at,
                      last_modified=http_date(modified_at) if modified_at else "")  # fmt: skip
    return s.plan(prev, obs, url="http://h/", host="h", mu=mu)


def test_poisson_plan_tracks_history_and_gives_up_on_pages_too_fast_to_follow() -> None:
    s = poisson()
    change, rv = fetch(s, None, NOW, digest="d0")
    assert change is Change.NEW and rv.fetches == 1 and rv.changes == 0 and rv.interval == 0.0
    assert NOW + 5.0 <= rv.next_fetch <= NOW + 5000.0
    t, rv_blind, rv_dated = NOW, rv, rv
    for k in range(1, 8):
        t += 100.0
        _, rv_blind = fetch(s, rv_blind, t, digest=f"d{k}")  # no Last-Modified: changed somewhere in each
        _, rv_dated = fetch(s, rv_dated, t, digest=f"d{k}", modified_at=t - 1.0)  # changed a second ago
    assert rv_blind.changes == 7 and rv_blind.interval == pytest.approx(7 * 50.0)
    assert revisit_rate(rv_blind, PRIOR) == pytest.approx((7 + PRIOR_CHANGES) / (350.0 + PRIOR_CHANGES / PRIOR))
    # the server says each version is a second old: a rate no revisit here can follow; given up
    assert revisit_rate(rv_dated, PRIOR) > 0.05 and rv_dated.next_fetch == t + 5000.0
    # without Last-Modified the same history still says "follow it", sooner than T0
    assert 5.0 <= rv_blind.next_fetch - t < T0
    # with a tight budget (large mu) it is given up too
    assert fetch(s, rv_blind, t + 100.0, digest="d9", mu=200.0)[1].next_fetch == t + 100.0 + 5000.0
    # the same history, never changed: long, but not given up
    _, rv_slow = fetch(s, None, NOW, digest="same")
    t = NOW
    for _ in range(7):
        t += 100.0
        _, rv_slow = fetch(s, rv_slow, t, digest="same")
    assert rv_slow.changes == 0 and T0 < rv_slow.next_fetch - t < 5000.0


def test_a_page_last_modified_long_ago_comes_back_later_than_a_fresh_one() -> None:
    s = poisson()
    _, old = fetch(s, None, NOW, digest="a", modified_at=NOW - 365 * 86_400)
    _, new = fetch(s, None, NOW, digest="a", modified_at=NOW - 60)
    _, now = fetch(s, None, NOW, digest="a", modified_at=NOW)  # a generated page's header: no information
    _, blind = fetch(s, None, NOW, digest="a")
    assert old.next_fetch - NOW > 4 * (new.next_fetch - NOW)
    assert now.next_fetch == blind.next_fetch


def test_poisson_plan_uses_the_callers_mu_and_a_304_keeps_validators() -> None:
    s = poisson()
    _, rv = fetch(s, None, NOW, digest="a")
    _, rv = fetch(s, rv, NOW + 100.0, digest="b")
    _, rv = fetch(s, rv, NOW + 200.0, digest="a")  # two changes in two intervals
    wait_small_mu = fetch(s, rv, NOW + 300.0, digest="", status=304, mu=1.0)[1].next_fetch - NOW - 300.0
    change, rv304 = fetch(s, rv, NOW + 300.0, digest="", status=304, mu=30.0)
    assert change is Change.NOT_MODIFIED and rv304.digest == "a" and rv304.etag == '"e"'
    assert rv304.changes == 2 and rv304.fetches == 4
    assert rv304.next_fetch - NOW - 300.0 > wait_small_mu  # a larger mu (tighter budget) waits longer here


def test_failed_fetch_under_poisson_keeps_the_state() -> None:
    s = poisson()
    _, rv = fetch(s, None, 0.0, digest="a")
    change, after = s.plan(rv, Observation(fetched_at=50.0, status=0, failed=True), url="http://h/", host="h")
    assert change is Change.FAILED and after.fetches == rv.fetches and after.digest == "a"


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="policy"):
        Schedule(RecrawlSettings(policy="random"))


def test_poisson_is_the_default() -> None:
    assert RecrawlSettings().policy == "poisson" and Schedule(RecrawlSettings()).poisson
    assert not Schedule(RecrawlSettings(adaptive=False)).poisson  # uniform revisiting
