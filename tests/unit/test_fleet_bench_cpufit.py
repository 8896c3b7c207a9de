"""The bench's split of a process's CPU into a per-page and a per-second rate (cputrace.fit_rates)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from pipeline.harness.bench.cputrace import bucket_series, cpu_at, fit_rates


def _trace(a: float, b: float, pages_per_s: Sequence[float], *, noise: float = 0.0, seed: int = 1):
    """A fake process: one CPU sample per second, pages arriving at the given rate each second."""
    rnd = random.Random(seed)
    times, cpu, events = [0.0], [0.0], []
    total = 0.0
    for i, rate in enumerate(pages_per_s):
        total += a * rate + b * 1.0 + rnd.gauss(0, noise)
        times.append(i + 1.0)
        cpu.append(total)
        events.append((i + 0.5, int(rate)))
    return times, cpu, events


def test_two_rates_recovered_from_a_run_whose_page_rate_varies() -> None:
    rates = [0, 0, 100, 400, 50, 0, 300, 300, 10, 0, 250, 600] * 3
    times, cpu, events = _trace(0.0002, 0.03, rates)
    fit = fit_rates(bucket_series(times, cpu, events, t0=0.0, t1=len(rates), bucket_s=1.0))
    assert math.isclose(fit.per_page_s, 0.0002, rel_tol=1e-6)
    assert math.isclose(fit.per_s, 0.03, rel_tol=1e-6)
    assert fit.buckets == len(rates)
    assert fit.r2 > 0.999


def test_noise_moves_the_fit_a_little_and_not_the_sign() -> None:
    rnd = random.Random(3)
    rates = [rnd.randrange(0, 500) for _ in range(120)]
    times, cpu, events = _trace(0.0001, 0.04, rates, noise=0.002)
    fit = fit_rates(bucket_series(times, cpu, events, t0=0.0, t1=120.0, bucket_s=2.0))
    assert abs(fit.per_page_s - 0.0001) < 0.00002
    assert abs(fit.per_s - 0.04) < 0.005


def test_rates_never_negative() -> None:
    # CPU falls with pages here (impossible for a real process, possible for noisy buckets): the fit
    # keeps the better one-rate model instead of a negative rate.
    series = [(1.0, 0.0, 1.0), (0.5, 100.0, 1.0), (0.9, 10.0, 1.0)]
    fit = fit_rates(series)
    assert fit.per_page_s == 0.0 and fit.per_s > 0


def test_too_few_buckets_is_nan() -> None:
    fit = fit_rates([(1.0, 10.0, 1.0)])
    assert math.isnan(fit.per_page_s) and math.isnan(fit.per_s) and fit.buckets == 1


def test_buckets_count_events_once_and_cover_the_window() -> None:
    times, cpu = [0.0, 10.0], [0.0, 5.0]
    series = bucket_series(
        times, cpu, [(0.5, 3), (9.9, 4), (10.0, 1), (11.0, 100)], t0=0.0, t1=10.0, bucket_s=2.5
    )
    assert len(series) == 4
    assert sum(p for _, p, _ in series) == 8  # the event after the window is not counted
    assert math.isclose(sum(c for c, _, _ in series), cpu_at(times, cpu, 10.0) - cpu_at(times, cpu, 0.0))
    assert math.isclose(sum(d for _, _, d in series), 10.0)
