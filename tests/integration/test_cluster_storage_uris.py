"""pipeline/storage/uris.py's clients on the dev stack's cluster services: a segment written under a
temporary name, renamed into place, listed, read and deleted, on hdfs:// (WebHDFS) and on s3:// (s3proxy,
reached through the standard AWS variables that ``scripts/svc-s3.sh env`` prints)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import s3fs

from jobs import cluster
from pipeline.storage import uris

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _round_trip(base: str) -> None:
    body = b'{"url": "http://h/1"}\n' * 500
    tmp, final = uris.locate(uris.join(base, ".segment-1.tmp")), uris.locate(uris.join(base, "segment-1.jsonl"))
    tmp.fs.pipe(tmp.path, body)
    tmp.fs.mv(tmp.path, final.path)
    listed = final.fs.ls(uris.locate(base).path, detail=False)
    assert [p.rsplit("/", 1)[-1] for p in listed] == ["segment-1.jsonl"]
    assert final.fs.cat(final.path) == body
    final.fs.rm(uris.locate(base).path, recursive=True)
    assert not final.fs.exists(final.path)


def test_segments_on_hdfs(hdfs_yarn: str, unique: str) -> None:
    _round_trip(f"{cluster.namenode_uri()}/tmp/crawlfleet-tests/{unique}")


def test_segments_on_s3(s3_server: dict[str, object], unique: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = subprocess.run([str(ROOT / "scripts" / "svc-s3.sh"), "env"], capture_output=True, text=True,
                           check=True).stdout.splitlines()  # fmt: skip
    for key, _, value in (line.partition("=") for line in lines):
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()  # the next one is built with this environment
    _round_trip(f"s3://crawlfleet/tests/{unique}")
