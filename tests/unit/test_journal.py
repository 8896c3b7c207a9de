"""Segments journal: append, rotate, replay after a checkpoint, torn lines."""

from __future__ import annotations

from pathlib import Path

from fetchers.records import FetchResult
from pipeline.storage.journal import Checkpoint, SegmentWriter, replay


def result(i: int) -> FetchResult:
    return FetchResult(url=f"http://a.test/{i}", url_id=i, depth=1, status=200, body=b"x" * 100, serial=7)


def test_replay_after_checkpoint(tmp_path: Path) -> None:
    w = SegmentWriter(tmp_path, max_bytes=600)
    for i in range(3):
        w.append(result(i))
    cp = w.position()
    for i in range(3, 8):
        w.append(result(i))
    w.close()
    assert len(list(tmp_path.glob("segment-*.jsonl"))) > 1  # rotated
    assert [r.url_id for r in replay(tmp_path, cp)] == [3, 4, 5, 6, 7]
    assert [r.url_id for r in replay(tmp_path, None)] == list(range(8))
    assert Checkpoint.decode(cp.encode()) == cp


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    w = SegmentWriter(tmp_path)
    w.append(result(1))
    w.append_line(b'{"v": 1, "url": "http://a.test/torn"')  # no newline: a write cut by a kill
    w.close()
    assert [r.url_id for r in replay(tmp_path, None)] == [1]


def test_reopening_continues_in_a_new_segment(tmp_path: Path) -> None:
    w = SegmentWriter(tmp_path)
    w.append(result(1))
    w.close()
    w2 = SegmentWriter(tmp_path)
    w2.append(result(2))
    w2.close()
    assert [r.url_id for r in replay(tmp_path, None)] == [1, 2]
