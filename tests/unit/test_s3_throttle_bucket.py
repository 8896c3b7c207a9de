"""The byte bucket of bench s3's bandwidth-limited node paths: responses paced at ``rate`` bytes/s."""

from __future__ import annotations

import pytest

from pipeline.harness.bench.throttle import CHUNK, Bucket


def test_the_bucket_lets_a_burst_through_then_paces_at_its_rate() -> None:
    b = Bucket(100_000.0, _at=0.0)
    assert b.take(CHUNK, 0.0) == 0.0
    assert b.take(CHUNK, 0.0) == 0.0  # the burst: two chunks
    assert b.take(10_000, 0.0) == pytest.approx(0.1)  # 10 KB over at 100 KB/s
    # Sent after waiting, the next chunk waits its own share: 1 MB takes 10 s whatever the chunking.
    now = 0.1
    for _ in range(100):
        w = b.take(10_000, now)
        now += w
    assert now == pytest.approx(10.1, rel=1e-6)


def test_a_faster_path_waits_proportionally_less() -> None:
    """1 MB asked at once: the wait before its last byte is bytes over the rate (less the burst)."""
    slow, fast = Bucket(100_000.0, _at=0.0), Bucket(400_000.0, _at=0.0)
    w_slow = [slow.take(20_000, 0.0) for _ in range(50)][-1]
    w_fast = [fast.take(20_000, 0.0) for _ in range(50)][-1]
    assert w_slow == pytest.approx((1_000_000 - 2 * CHUNK) / 100_000)
    assert w_slow / w_fast == pytest.approx(4.0)
