"""pipeline.frontier.dedup.SeenFilter against a tiny in-test Store fake (only add_urls is exercised)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from pipeline.frontier.dedup import SeenFilter
from pipeline.storage.base import UrlRecord
from pipeline.urls import fingerprint


class FakeStore:
    """The seen-set half of the Store contract: add_urls inserts unknown URLs, raises in-links of known."""

    def __init__(self) -> None:
        self.rows: dict[int, UrlRecord] = {}
        self.calls: list[int] = []

    def add_urls(self, records: Sequence[UrlRecord], *, count_inlinks: bool = True) -> list[UrlRecord]:
        self.calls.append(len(records))
        new: list[UrlRecord] = []
        for rec in records:
            row = self.rows.get(rec.url_id)
            if row is None:
                self.rows[rec.url_id] = UrlRecord(rec.url, rec.url_id, rec.host, rec.depth, inlinks=max(rec.inlinks, 1))
                new.append(rec)
            elif count_inlinks:
                row.inlinks += max(rec.inlinks, 1)
        return new


def rec(n: int) -> UrlRecord:
    url = f"http://h.test/{n}"
    return UrlRecord(url, fingerprint(url), "h.test", 1, inlinks=1)


def make(lru: int, **kw: Any) -> tuple[SeenFilter, FakeStore]:
    store = FakeStore()
    return SeenFilter(store, lru_size=lru, **kw), store  # type: ignore[arg-type]


def test_new_urls_once_then_answered_locally() -> None:
    f, store = make(100)
    assert [r.url for r in f.add_new([rec(1), rec(2), rec(1)])] == ["http://h.test/1", "http://h.test/2"]
    assert store.calls == [2]  # one round trip, the in-batch repeat answered locally
    assert f.add_new([rec(1), rec(2)]) == []
    assert store.calls == [2]  # all from the LRU: no round trip at all
    assert (f.local_hits, f.remote_lookups, f.round_trips) == (3, 2, 1)


def test_one_round_trip_per_batch() -> None:
    f, store = make(10)
    new = f.add_new([rec(i) for i in range(50)])
    assert len(new) == 50 and store.calls == [50] and f.round_trips == 1


def test_lru_is_bounded_and_evicted_urls_are_asked_again_but_not_new() -> None:
    f, store = make(3)
    f.add_new([rec(i) for i in range(10)])
    assert len(f) == 3 and f.stats.evictions == 7
    assert f.add_new([rec(0)]) == []  # evicted: asked remotely, store says known
    assert f.remote_lookups == 11


def test_zero_size_lru_is_the_baseline() -> None:
    f, store = make(0)
    f.add_new([rec(1)])
    f.add_new([rec(1)])
    assert f.local_hits == 0 and f.remote_lookups == 2 and len(f) == 0


def test_recently_used_entries_survive_eviction() -> None:
    f, _ = make(2)
    f.add_new([rec(1)])
    f.add_new([rec(2)])
    f.add_new([rec(1)])  # touch 1, so 2 is the oldest
    f.add_new([rec(3)])
    before = f.remote_lookups
    f.add_new([rec(1)])
    assert f.remote_lookups == before


def test_inlinks_of_local_hits_ride_along_and_flush() -> None:
    f, store = make(100, track_inlinks=True)
    f.add_new([rec(1)])
    f.add_new([rec(1), rec(1)])  # two local hits, no round trip
    assert store.calls == [1]
    f.add_new([rec(2)])  # the buffered increment rides along with this call
    assert store.calls == [1, 2] and store.rows[rec(1).url_id].inlinks == 3
    assert f.stats.inlink_updates == 1 and f.remote_lookups == 2
    f.add_new([rec(2)])
    f.flush()
    assert store.rows[rec(2).url_id].inlinks == 2 and store.calls == [1, 2, 1]
    f.flush()
    assert store.calls == [1, 2, 1]


def test_inlink_buffer_is_bounded() -> None:
    f, store = make(100, track_inlinks=True, max_buffered_inlinks=2)
    f.add_new([rec(i) for i in range(5)])
    f.add_new([rec(0), rec(1)])  # buffer now full: it goes out in this call
    assert store.calls == [5, 2]


def test_bad_sizes_are_rejected() -> None:
    with pytest.raises(ValueError):
        make(-1)


def test_known_answers_from_the_lru_only() -> None:
    f, store = make(10)
    assert not f.known(rec(1).url_id)
    f.add_new([rec(1)])
    assert f.known(rec(1).url_id) and f.local_hits == 1
    assert store.calls == [1]


def test_known_many_asks_the_table_for_what_the_lru_forgot_in_one_search() -> None:
    from pipeline.frontier.seentable import FingerprintTable

    table = FingerprintTable(max_entries=100)
    f, store = make(2, table=table)
    f.add_new([rec(i) for i in range(5)])  # the LRU keeps 3 and 4; the table has all five
    searched: list[int] = []
    real = table.contains_many

    def counted(ids: Sequence[int]) -> list[bool]:
        searched.append(len(ids))
        return real(ids)

    table.contains_many = counted  # type: ignore[method-assign]
    ids = [rec(i).url_id for i in (4, 0, 9, 3, 1)]
    assert f.known_many(ids) == [True, True, False, True, True]
    assert searched == [3]  # the LRU's misses only, in one call
    assert f.stats.local_hits == 2 and f.stats.table_hits == 2 and store.calls == [5] and len(f) == 2
    g, _ = make(10)  # no table: the LRU alone, misses mean "ask the store"
    g.add_new([rec(1)])
    assert g.known_many([rec(1).url_id, rec(2).url_id]) == [True, False]


def test_snapshot_and_preload_carry_the_cache_to_a_new_filter() -> None:
    f, store = make(3)
    f.add_new([rec(i) for i in range(5)])
    snap = f.snapshot()
    assert snap == [rec(i).url_id for i in (2, 3, 4)]
    g = SeenFilter(store, lru_size=2)  # type: ignore[arg-type]
    g.preload(snap)
    assert len(g) == 2 and g.add_new([rec(3), rec(4)]) == [] and g.round_trips == 0


def test_table_answers_what_the_lru_forgot_without_a_round_trip() -> None:
    from pipeline.frontier.seentable import FingerprintTable

    f, store = make(2, table=FingerprintTable(max_entries=100))
    assert len(f.add_new([rec(i) for i in range(10)])) == 10
    assert store.calls == [10]
    assert f.add_new([rec(i) for i in range(10)]) == []  # evicted from the LRU, known to the table
    assert store.calls == [10] and f.stats.table_hits == 8 and len(f) == 2  # the LRU kept the last 2
    new = f.add_new([rec(5), rec(11)])
    assert [r.url for r in new] == ["http://h.test/11"] and store.calls == [10, 1]


def test_a_full_table_still_never_calls_a_known_url_new() -> None:
    from pipeline.frontier.seentable import FingerprintTable

    table = FingerprintTable(max_entries=3)
    f, store = make(0, table=table)
    f.add_new([rec(i) for i in range(6)])
    assert not table.complete
    assert f.add_new([rec(i) for i in range(6)]) == []  # misses of the full table are asked, and known
    assert f.stats.table_hits == 3 and store.calls == [6, 3]


def test_table_hits_still_count_inlinks() -> None:
    from pipeline.frontier.seentable import FingerprintTable

    f, store = make(0, table=FingerprintTable(max_entries=100), track_inlinks=True)
    f.add_new([rec(1)])
    f.add_new([rec(1), rec(1)])
    f.flush()
    assert store.rows[rec(1).url_id].inlinks == 3


class BlindStore(FakeStore):
    """A store that raises in-links without reading (``Store.blind_inlinks``, HBase in a link-jobs round)."""

    blind_inlinks = True

    def __init__(self) -> None:
        super().__init__()
        self.raised: list[list[tuple[int, int]]] = []

    def raise_inlinks(self, records: Sequence[UrlRecord]) -> None:
        self.raised.append(sorted((r.url_id, r.inlinks) for r in records))
        for r in records:
            self.rows[r.url_id].inlinks += max(r.inlinks, 1)


def test_a_blind_store_gets_local_hits_apart_once_per_url_at_flush() -> None:
    store = BlindStore()
    f = SeenFilter(store, lru_size=100, track_inlinks=True)  # type: ignore[arg-type]
    f.add_new([rec(1), rec(2)])
    f.add_new([rec(1), rec(1)])  # local hits: buffered, summed
    f.add_new([rec(3)])  # a look-up: the buffered increments do not ride along with it
    assert store.calls == [2, 1] and store.raised == []
    f.flush()
    assert store.raised == [[(rec(1).url_id, 2)]] and store.rows[rec(1).url_id].inlinks == 3
    assert f.stats.inlink_updates == 1 and f.round_trips == 3


def test_a_blind_store_gets_a_full_buffer_at_once() -> None:
    store = BlindStore()
    f = SeenFilter(store, lru_size=100, track_inlinks=True, max_buffered_inlinks=2)  # type: ignore[arg-type]
    f.add_new([rec(i) for i in range(5)])
    f.add_new([rec(0)])
    assert store.raised == []
    f.add_new([rec(1)])  # the buffer is full now: it goes out in this call, without a look-up
    assert store.raised == [sorted([(rec(0).url_id, 1), (rec(1).url_id, 1)])] and store.calls == [5]
