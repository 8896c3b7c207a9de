"""Segments at a storage URI (``pipeline.storage.segments``) on the local filesystem, named as a path and as
a ``file://`` URI: a node's whole write and rename, the link jobs' listing, adoption of a killed node's part,
retirement and retention. The same code on ``hdfs://`` and ``s3://`` is tested against the real servers in
tests/integration/test_segments_remote.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.storage import uris
from pipeline.storage.segments import ABANDON_S, DONE_DIR, Segments, key_of


@pytest.fixture(params=["path", "uri"])
def segs(request: pytest.FixtureRequest, tmp_path: Path) -> Segments:
    root = tmp_path / "segs"
    return Segments(str(root) if request.param == "path" else root.as_uri())


def test_a_written_part_is_invisible_until_closed(segs: Segments) -> None:
    part = segs.write_part("n1", "svc-1.jsonl", b'{"a":1}\n')
    assert part == "n1/svc-1.jsonl.part" and segs.closed(now=0.0) == []
    key = segs.close_part(part)
    [info] = segs.closed()
    assert (info.key, info.size) == (key, 8) == ("n1/svc-1.jsonl", 8)
    assert list(segs.read_lines(key)) == [b'{"a":1}\n']
    assert segs.uri(key).endswith("/segs/n1/svc-1.jsonl") and key_of(segs.uri(key)) == key


def test_an_old_part_is_adopted_whole_lines_only_and_a_young_one_left(segs: Segments, tmp_path: Path) -> None:
    segs.write_part("n1", "s-1.jsonl", b'{"a":1}\n{"b":')  # a node killed mid-line
    part = tmp_path / "segs" / "n1" / "s-1.jsonl.part"
    t = part.stat().st_mtime
    assert segs.closed(now=t + 1) == []  # a live node's, maybe
    [info] = segs.closed(now=t + ABANDON_S)
    assert info.key == "n1/s-1.jsonl" and list(segs.read_lines(info.key)) == [b'{"a":1}\n']
    segs.write_part("n3", "s-3.jsonl", b"{}\n")
    assert segs.parts("n3") == ["n3/s-3.jsonl.part"]
    assert segs.adopt("n3/s-3.jsonl.part") == "n3/s-3.jsonl" and segs.parts("n3") == []


def test_retire_deletes_or_keeps_under_done_and_expiry_deletes_old_ones(segs: Segments, tmp_path: Path) -> None:
    for name in ("a.jsonl", "b.jsonl"):
        segs.close_part(segs.write_part("n1", name, b"{}\n"))
    segs.retire("n1/a.jsonl", keep=False)
    segs.retire("n1/b.jsonl", keep=True)
    segs.retire("n1/gone.jsonl", keep=True)  # already retired: nothing to do
    assert segs.closed() == []
    kept = tmp_path / "segs" / DONE_DIR / "n1" / "b.jsonl"
    assert kept.exists() and not (tmp_path / "segs" / DONE_DIR / "n1" / "a.jsonl").exists()
    os.utime(kept, (100.0, 100.0))
    assert segs.expire_done(older_than=50.0) == 0 and segs.expire_done(older_than=200.0) == 1
    assert not kept.exists()


def test_uris_are_checked_and_split() -> None:
    for bad in ("rel/path", "ftp://h/x", "s3:///nobucket", "file://host/x", "/a/../b", "hdfs://nn/a\x00"):
        with pytest.raises(ValueError):
            uris.check(bad)
    assert uris.join("s3://b/root/", "n1", "x.jsonl") == "s3://b/root/n1/x.jsonl"
    loc = uris.locate("s3://bucket/root/n1")
    assert loc.path == "bucket/root/n1"
    hdfs = uris.locate("hdfs://nn.test:8020/crawl/segs")
    assert hdfs.path == "/crawl/segs" and hdfs.fs.url.startswith(f"http://nn.test:{uris.WEBHDFS_PORT}/")
