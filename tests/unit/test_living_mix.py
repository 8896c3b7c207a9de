"""The living web's change mixes (#23 point 8): ``classic`` is the first living web unchanged, ``measured``
has its declared shares and rates; the freshness bench's oracle and its 304 accounting. Pure."""

from __future__ import annotations

import collections

import pytest

from pipeline.harness.bench.freshtruth import oracle, page_rates
from pipeline.harness.bench.freshweb import conditional_figures
from pipeline.harness.testbed.liverender import honours_conditional, page_bytes
from pipeline.harness.testbed.livetruth import page_version
from pipeline.harness.testbed.living import (
    CLASSIC,
    CONTENT_CLASSES,
    DAILY,
    MARKUP,
    MEAN_S,
    MEASURED,
    MIXES,
    MONTHLY,
    STATIC,
    WEEKLY,
    Living,
    page_class,
    state,
    tick_s,
)
from pipeline.harness.testbed.model import Web

EPOCH = 1_800_000_000.0


def web_of(mix: str, hosts: int = 12, pages: int = 30, rate: float = 1.0) -> Web:
    return Web(hosts, pages, seed=3, port=8080, living=Living(EPOCH, rate, mix=mix))


def test_classic_is_the_default_and_unchanged() -> None:
    assert Living(EPOCH).mix == CLASSIC
    for i in range(30):
        for m in range(30):
            assert page_class(3, i, m) == page_class(3, i, m, mix=CLASSIC)
            assert state(3, i, m, 5000.0) == state(3, i, m, 5000.0, mix=CLASSIC)
    with pytest.raises(ValueError, match="mix"):
        Living(EPOCH, mix="bursty")


def test_measured_shares_are_the_declared_ones() -> None:
    counts = collections.Counter(page_class(5, i, m, mix=MEASURED) for i in range(100) for m in range(100))
    shares = {STATIC: 0.35, MARKUP: 0.10, DAILY: 0.15, WEEKLY: 0.25, MONTHLY: 0.15}
    assert set(counts) == set(shares)
    for cls, share in shares.items():
        assert abs(counts[cls] / 10_000 - share) < 0.02, (cls, counts)
    bounds = [b for b, _ in MIXES[MEASURED]]
    assert bounds == sorted(bounds) and bounds[-1] == 100


@pytest.mark.parametrize("cls", [DAILY, WEEKLY, MONTHLY, MARKUP])
def test_measured_classes_change_at_their_mean_rate(cls: str) -> None:
    web = web_of(MEASURED, 40, 40)
    pages = [(i, m) for i in range(40) for m in range(40) if page_class(web.seed, i, m, mix=MEASURED) == cls][
        :15
    ]
    step, ticks = tick_s(cls), int(MEAN_S[cls] * 200 / tick_s(cls))
    changes = 0
    for i, m in pages:
        prev = state(web.seed, i, m, 0.0, mix=MEASURED)
        for k in range(1, ticks + 1):
            cur = state(web.seed, i, m, k * step, mix=MEASURED)
            changes += cur != prev
            prev = cur
    assert abs(changes / (200 * len(pages)) - 1) < 0.12


def test_markup_pages_change_bytes_not_content_and_truth_follows_the_mix() -> None:
    web = web_of(MEASURED)
    i, m = next((i, m) for i in range(12) for m in range(30) if page_class(3, i, m, mix=MEASURED) == MARKUP)
    a, b = page_bytes(web, i, m, 0.0), page_bytes(web, i, m, MEAN_S[MARKUP] * 30)
    assert a != b and b'class="updated"' in b
    url = web.url(i, web.page_path(m))
    assert page_version(web, url, 0.0).version == page_version(web, url, MEAN_S[MARKUP] * 30).version == 0  # type: ignore[union-attr]
    j, n = next((i, m) for i in range(12) for m in range(30) if page_class(3, i, m, mix=MEASURED) == DAILY)
    daily = page_version(web, web.url(j, web.page_path(n)), 0.0)
    assert daily is not None and daily.cls == DAILY


def test_oracle_is_at_least_uniform_and_rates_are_per_wall_second() -> None:
    web = web_of(MEASURED, rate=1000.0)
    rates = page_rates(web)
    for i, per in rates.items():
        for m, r in enumerate(per):
            cls = page_class(web.seed, i, m, mix=MEASURED)
            assert r == (1000.0 / MEAN_S[cls] if cls in CONTENT_CLASSES else 0.0)
    assert web.living is not None
    epoch = web.living.epoch
    got = oracle(web, host_budget_rps=1.0, low=1.0, high=1e6, since=epoch + 10.0, until=epoch + 60.0)
    assert got["optimal"]["freshness"] >= got["uniform"]["freshness"]  # type: ignore[index]
    assert got["freshness_ratio"] >= 1.0 and got["age_ratio"] <= 1.0  # type: ignore[operator]


def test_conditional_figures_count_byte_unchanged_refetches_by_host_kind() -> None:
    web = web_of(MEASURED, rate=1.0)
    honours = next(i for i in range(12) if honours_conditional(i))
    ignores = next(i for i in range(12) if not honours_conditional(i))
    static = {
        i: next(m for m in range(30) if page_class(3, i, m, mix=MEASURED) == STATIC)
        for i in (honours, ignores)
    }

    def entry(i: int, t: float, status: int) -> dict[str, object]:
        return {
            "t": EPOCH + t,
            "host": f"site{i}.crawl.test",
            "path": web.page_path(static[i]),
            "status": status,
        }

    log = [entry(honours, 1, 200), entry(honours, 2, 304), entry(honours, 3, 200),
           entry(ignores, 1, 200), entry(ignores, 2, 200), entry(ignores, 3, 200)]  # fmt: skip
    got = conditional_figures(web, log, since=EPOCH, until=EPOCH + 10)
    assert got["byte_unchanged_refetches"] == 4 and got["status_304"] == 1
    assert got["share_304_honouring_hosts"] == 0.5 and got["share_304_all_hosts"] == 0.25
    # outside the window: the first fetches only set the baseline
    assert conditional_figures(web, log, since=EPOCH + 2.5, until=EPOCH + 10)["byte_unchanged_refetches"] == 2
