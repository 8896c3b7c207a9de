"""S3's sizing rule on controlled inputs: three fetchers whose batch time is F + n * b_i with per-page
times 4b, 2b, b (1x, 2x, 4x), sized each round by the dispatcher's own estimator and formula
(pipeline.dispatch.sizing with the default dispatch settings). Once settled, the batches order by speed
and the 4x fetcher's is at least 2.5x the 1x fetcher's; equal batches or sizes that ignore the
measured times fail this. (The real fleet's measured sizes are ``crawlfleet bench s3``'s figure.)
"""

from __future__ import annotations

from pipeline.dispatch.sizing import PageTimeHistory, batch_size
from pipeline.settings import DispatchSettings

K, FIXED_S, BASE_S = 32, 0.3, 0.04  # base batch size; a batch's fixed cost; the 4x fetcher's time per page


def sizes_after(rounds: int, *, sized: bool = True) -> list[int]:
    d = DispatchSettings()
    speeds = (1, 2, 4)
    hist = {s: PageTimeHistory.of(d) for s in speeds}
    n = dict.fromkeys(speeds, K)
    for _ in range(rounds):
        for s in speeds:
            seconds = FIXED_S + n[s] * BASE_S * 4 / s
            hist[s].add(seconds / n[s], pages=n[s])
        ts = {s: hist[s].mean for s in speeds}
        avg = sum(t for t in ts.values() if t is not None) / len(speeds)
        for s in speeds:
            n[s] = batch_size(k=K, t_i=ts[s] if sized else None, avg=avg, n_min=4, n_max=8 * K)
    return [n[s] for s in speeds]


def test_settled_sizes_order_by_speed() -> None:
    slow, mid, fast = sizes_after(20)
    assert slow < mid < fast and fast >= 2.5 * slow, (slow, mid, fast)
    assert sizes_after(20) == sizes_after(21)  # settled: the sizes stop moving


def test_sizes_that_ignore_the_times_fail_the_rule() -> None:
    slow, mid, fast = sizes_after(20, sized=False)
    assert not (slow < mid < fast)
