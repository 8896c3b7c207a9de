"""The embedded crawl's item log (pipeline/storage/itemlog.py): whatever moment a kill chooses, a resume
finds exactly the items of the pages below the last commit, and Parquet files for closed JSONL files."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.storage.itemfiles import read_items
from pipeline.storage.itemlog import ItemLog
from pipeline.storage.journal import Checkpoint


def _page(n: int, items: int = 2) -> bytes:
    return b"".join(
        json.dumps({"type": "t", "url": f"u{n}", "digest": f"d{n}", "fetched_at": 1.0, "item": {"k": k}}).encode()
        + b"\n" for k in range(items)
    )  # fmt: skip


def _urls(directory: Path) -> list[str]:
    return [obj["url"] for obj in read_items(str(directory))]


def test_a_resume_cuts_back_to_the_commit_and_names_its_journal_position(tmp_path: Path) -> None:
    log = ItemLog(tmp_path, max_bytes=1 << 20)
    log.write(_page(1))
    log.write(_page(2))
    log.commit(Checkpoint("segment-00000.jsonl", 500))
    log.write(_page(3))  # past the commit: its page is replayed and writes it again
    with open(tmp_path / "items-00000.jsonl", "ab") as fh:
        fh.write(b'{"type": "t", "url": "u4", "dig')  # torn by a kill mid-write
    again = ItemLog(tmp_path, max_bytes=1 << 20)  # no close: the kill
    assert again.committed == Checkpoint("segment-00000.jsonl", 500)
    assert _urls(tmp_path) == ["u1", "u1", "u2", "u2"]
    again.write(_page(3))
    assert _urls(tmp_path) == ["u1", "u1", "u2", "u2", "u3", "u3"]


def test_files_past_the_commit_go_and_rotation_goes_on_after_it(tmp_path: Path) -> None:
    log = ItemLog(tmp_path, max_bytes=100)
    for n in range(3):
        log.write(_page(n))  # each page fills a file: the next write opens a new one
    log.commit(Checkpoint("segment-00001.jsonl", 10))
    log.write(_page(3))
    log.write(_page(4))
    names = sorted(p.name for p in tmp_path.glob("items-*.jsonl"))
    assert names == [f"items-0000{i}.jsonl" for i in range(5)]
    ItemLog(tmp_path, max_bytes=100)
    assert sorted(p.name for p in tmp_path.glob("items-*.jsonl")) == names[:3]
    assert _urls(tmp_path) == ["u0", "u0", "u1", "u1", "u2", "u2"]


def test_parquet_files_replace_closed_jsonl_files_and_read_alike(tmp_path: Path) -> None:
    log = ItemLog(tmp_path, max_bytes=100, fmt="parquet")
    for n in range(3):
        log.write(_page(n))
    log.commit(Checkpoint("segment-00000.jsonl", 1))
    log.close()
    assert sorted(p.name for p in tmp_path.glob("items-*")) == [f"items-0000{i}.parquet" for i in range(3)]
    assert _urls(tmp_path) == ["u0", "u0", "u1", "u1", "u2", "u2"]
    assert [obj["item"] for obj in read_items(str(tmp_path))][:2] == [{"k": 0}, {"k": 1}]
    resumed = ItemLog(tmp_path, max_bytes=100, fmt="parquet")  # a resume appends to a new file
    resumed.write(_page(9))
    resumed.commit(Checkpoint("segment-00000.jsonl", 2))
    resumed.close()
    assert _urls(tmp_path)[-2:] == ["u9", "u9"] and len(list(tmp_path.glob("items-*.parquet"))) == 4


def test_both_formats_keep_the_jsonl_and_items_are_read_once(tmp_path: Path) -> None:
    log = ItemLog(tmp_path, max_bytes=100, fmt="both")
    log.write(_page(0))
    log.write(_page(1))
    log.commit(Checkpoint("segment-00000.jsonl", 1))
    log.close()
    assert len(list(tmp_path.glob("*.jsonl"))) == 2 and len(list(tmp_path.glob("*.parquet"))) == 2
    assert _urls(tmp_path) == ["u0", "u0", "u1", "u1"]
