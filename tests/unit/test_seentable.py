"""pipeline.frontier.seentable.FingerprintTable: exact membership, bounded growth, and merges (with hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.frontier.seentable import FingerprintTable

i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(st.lists(i64, max_size=40), max_size=12), probe=st.lists(i64, max_size=40))
def test_membership_is_exact_across_tail_and_merges(batches: list[list[int]], probe: list[int]) -> None:
    t = FingerprintTable(max_entries=10_000, tail_max=7)  # a tiny tail: many merges
    added: set[int] = set()
    for batch in batches:
        t.add_many(batch)
        added.update(batch)
        assert t.contains_many(batch) == [True] * len(batch)
    assert t.complete
    queries = probe + list(added)
    assert t.contains_many(queries) == [q in added for q in queries]
    t._flush_tail()
    assert len(t) == len(added)  # merges drop repeats
    assert t.contains_many(queries) == [q in added for q in queries]


def test_extremes_and_empty() -> None:
    t = FingerprintTable(max_entries=10)
    assert t.contains_many([]) == []
    assert t.contains_many([0, -(2**63), 2**63 - 1]) == [False, False, False]
    t.load([2**63 - 1, -(2**63)])
    assert t.contains_many([0, -(2**63), 2**63 - 1]) == [False, True, True]


def test_growth_stops_at_the_cap_and_the_table_says_it_is_incomplete() -> None:
    t = FingerprintTable(max_entries=5, tail_max=2)
    t.add_many(range(5))
    assert t.complete and len(t) == 5
    t.add_many([3, 4])  # known ones do not count against the cap while they sit in the tail
    t.add_many([99])
    assert not t.complete
    assert t.contains_many([0, 4, 99]) == [True, True, False]  # hits stay exact; a miss means "ask"
    t.add_many([100])
    assert len(t) == 5


def test_load_streams_in_chunks_and_respects_the_cap() -> None:
    t = FingerprintTable(max_entries=1000)
    t.load(iter(range(0, 4000, 2)))
    assert not t.complete and len(t) == 1000
    assert t.contains_many([0, 1998, 1999]) == [True, True, False]
    assert t.nbytes == 8 * 1000


def test_bad_sizes_are_rejected() -> None:
    with pytest.raises(ValueError):
        FingerprintTable(max_entries=-1)
    with pytest.raises(ValueError):
        FingerprintTable(max_entries=1, tail_max=0)
