"""``RoundBook`` ids sort in the order rounds open, as the HBase store's blind in-link cells need
(``hbase_inlinks.ordered``), even when the wall clock steps back, within one book and across a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.storage.hbase_inlinks import ordered
from pipeline.transport import linkjobs
from pipeline.transport.linkjobs import RoundBook


def test_ids_sort_in_open_order_when_the_clock_steps_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([5_000, 4_000, 4_000, 1_000])
    monkeypatch.setattr(linkjobs.time, "time_ns", lambda: next(clock))
    seg = tmp_path / "a.jsonl"
    first = RoundBook(tmp_path).open([seg])
    second_book = RoundBook(tmp_path)  # a restarted service: only the manifests carry the last id
    ids = [first.id, *(second_book.open([seg]).id for _ in range(3))]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert all(ordered(i.encode()) for i in ids)


def test_ids_follow_the_clock_when_it_moves_on(tmp_path: Path) -> None:
    book = RoundBook(tmp_path)
    ids = [book.open([tmp_path / "a.jsonl"]).id for _ in range(5)]
    assert ids == sorted(ids)
    assert not ordered(b"jobs.done:/seg/a.jsonl") and not ordered(b"0123456789abcdef0123456789abcdef")
