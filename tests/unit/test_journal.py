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


def test_a_line_with_non_ascii_text_and_a_lone_surrogate_reads_back_the_same(tmp_path: Path) -> None:
    """The head's encoder takes UTF-8 text as it is; a header value that was not UTF-8 on the wire (a lone
    surrogate, which orjson refuses) goes through json's encoder. Both read back field for field."""
    from pipeline.storage.journal import journal_parts

    plain = FetchResult(url="http://h.test/é", url_id=-(2**63), depth=1, status=200, headers={"server": "ünï"},
                        content_type="text/html", body=b"<a href=x>x</a>", fetched_at=1.5)  # fmt: skip
    odd = FetchResult(url="http://h.test/x", url_id=2**63 - 1, depth=0, status=200,
                      headers={"x-robots-tag": "\udcff"}, body=b"")  # fmt: skip
    writer = SegmentWriter(tmp_path)
    for res in (plain, odd):
        line, packed = journal_parts(res)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        writer.append_line(line)
    writer.close()
    back = list(replay(tmp_path, None))
    assert [(r.url, r.url_id, r.headers, r.body) for r in back] == [
        (plain.url, plain.url_id, plain.headers, plain.body), (odd.url, odd.url_id, odd.headers, odd.body)]
