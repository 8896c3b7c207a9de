"""The adaptive re-crawl schedule (pipeline/frontier/schedule.py), on fetch times given by the test."""

from __future__ import annotations

import pytest

from pipeline.frontier.schedule import Change, Observation, Schedule, classify, parse_override
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Revisit

URL, HOST = "http://a.test/p", "a.test"


def sched(**kw: object) -> Schedule:
    base: dict[str, object] = {"initial_interval_s": 100.0, "min_interval_s": 10.0, "max_interval_s": 1000.0,
                               "sync_delta": False, "policy": "nutch"}  # fmt: skip
    base.update(kw)
    return Schedule(RecrawlSettings(**base))  # type: ignore[arg-type]


def obs(t: float, *, status: int = 200, digest: str = "d1", **kw: object) -> Observation:
    return Observation(fetched_at=t, status=status, digest=digest, **kw)  # type: ignore[arg-type]


def test_first_fetch_starts_at_the_initial_interval() -> None:
    change, r = sched().plan(None, obs(1000.0, etag='"e1"'), url=URL, host=HOST)
    assert change is Change.NEW
    assert (r.next_fetch, r.interval, r.etag, r.digest, r.fetches, r.changes) == (
        1100.0,
        100.0,
        '"e1"',
        "d1",
        1,
        0,
    )


def test_unchanged_stretches_and_changed_shrinks_within_bounds() -> None:
    s = sched()
    _, r = s.plan(None, obs(0.0), url=URL, host=HOST)
    change, r = s.plan(r, obs(100.0), url=URL, host=HOST)
    assert (
        change is Change.UNCHANGED
        and r.interval == pytest.approx(140.0)
        and r.next_fetch == pytest.approx(240.0)
    )
    change, r2 = s.plan(r, obs(240.0, digest="d2"), url=URL, host=HOST)
    assert (
        change is Change.CHANGED
        and r2.interval == pytest.approx(112.0)
        and r2.changes == 1
        and r2.digest == "d2"
    )
    t, cur = 240.0, r2
    for _ in range(40):  # never changes: the interval climbs to the maximum and stays
        t = cur.next_fetch
        _, cur = s.plan(cur, obs(t, digest="d2"), url=URL, host=HOST)
    assert cur.interval == 1000.0
    for _ in range(40):  # changes every time: down to the minimum
        t = cur.next_fetch
        _, cur = s.plan(cur, obs(t, digest=f"x{t}"), url=URL, host=HOST)
    assert cur.interval == 10.0


def test_a_304_keeps_the_copy_and_counts_as_unchanged() -> None:
    s = sched()
    _, r = s.plan(
        None, obs(0.0, etag='"e1"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT"), url=URL, host=HOST
    )
    change, r2 = s.plan(r, obs(100.0, status=304, digest=""), url=URL, host=HOST)
    assert change is Change.NOT_MODIFIED
    assert (r2.etag, r2.last_modified, r2.digest) == (r.etag, r.last_modified, "d1")
    assert r2.interval > r.interval and r2.fetches == 2 and r2.fetched_at == 100.0


def test_a_changed_page_drops_its_old_validators_unless_new_ones_came() -> None:
    s = sched()
    _, r = s.plan(None, obs(0.0, etag='"e1"'), url=URL, host=HOST)
    _, r2 = s.plan(r, obs(50.0, digest="d2"), url=URL, host=HOST)
    assert r2.etag == ""


def test_failure_keeps_interval_and_copy_and_retries_after_the_failed_interval() -> None:
    s = sched(failed_interval_s=30.0)
    _, r = s.plan(None, obs(0.0, etag='"e"'), url=URL, host=HOST)
    change, r2 = s.plan(r, Observation(fetched_at=100.0, status=0, failed=True), url=URL, host=HOST)
    assert change is Change.FAILED
    assert (r2.next_fetch, r2.interval, r2.digest, r2.etag, r2.fetches) == (130.0, 100.0, "d1", '"e"', 1)


def test_uniform_keeps_every_interval() -> None:
    s = sched(adaptive=False)
    _, r = s.plan(None, obs(0.0), url=URL, host=HOST)
    _, r = s.plan(r, obs(100.0), url=URL, host=HOST)
    _, r = s.plan(r, obs(200.0, digest="zz"), url=URL, host=HOST)
    assert r.interval == 100.0 and r.next_fetch == 300.0


def test_sync_delta_uses_the_change_time() -> None:
    s = sched(sync_delta=True, sync_delta_rate=0.5)
    _, r = s.plan(None, obs(0.0), url=URL, host=HOST)
    # changed 400 s before this fetch: the interval grows to the delta, the reference moves 200 s back
    _, r2 = s.plan(r, obs(1000.0, digest="d2", modified_at=600.0), url=URL, host=HOST)
    assert r2.interval == 400.0 and r2.next_fetch == 1200.0


def test_overrides_first_match_wins_and_pins() -> None:
    s = sched(overrides=("news.a.test=5:5", "*.a.test=20:50", "re:/feed$=1:2"))
    assert s.bounds("http://news.a.test/x", "news.a.test") == (5.0, 5.0)
    assert s.bounds("http://b.a.test/x", "b.a.test") == (20.0, 50.0)
    assert s.bounds("http://a.test/x", "a.test") == (20.0, 50.0)
    assert s.bounds("http://z.test/feed", "z.test") == (1.0, 2.0)
    assert s.bounds("http://z.test/other", "z.test") == (10.0, 1000.0)
    _, r = s.plan(None, obs(0.0), url="http://news.a.test/x", host="news.a.test")
    assert r.interval == 5.0 and r.next_fetch == 5.0


@pytest.mark.parametrize("bad", ["nohost", "a.test=1", "a.test=x:2", "a.test=5:1", "re:(=1:2", "=1:2"])
def test_bad_overrides_are_named(bad: str) -> None:
    with pytest.raises(ValueError, match="recrawl override"):
        parse_override(bad)


def test_simhash_near_duplicates_count_as_unchanged_only_when_asked() -> None:
    prev = Revisit(0.0, 100.0, digest="a", simhash=0b1111_0000, fetches=1)
    near = Observation(fetched_at=1.0, status=200, digest="b", simhash=0b1111_0011)
    assert classify(prev, near) is Change.CHANGED
    assert classify(prev, near, simhash_bits=2) is Change.UNCHANGED
    assert classify(prev, near, simhash_bits=1) is Change.CHANGED


def test_lastmod_after_the_fetch_makes_the_url_due() -> None:
    s = sched()
    prev = Revisit(next_fetch=500.0, interval=400.0, digest="d", fetches=1, fetched_at=100.0)
    assert s.on_lastmod(prev, 50.0, now=200.0) is None  # older than our copy
    due = s.on_lastmod(prev, 150.0, now=200.0)
    assert due is not None and due.next_fetch == 200.0 and due.digest == "d"
