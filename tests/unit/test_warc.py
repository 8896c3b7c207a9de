"""WARC output: records read back with warcio (digests checked), rotation, `warcio check`, export CLI."""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from pipeline.storage.base import Outcome, PageRecord, UrlRecord, UrlState
from pipeline.storage.cli import export_warc, verify
from pipeline.storage.sqlite import SqliteStore
from pipeline.storage.warc import WarcWriter
from pipeline.urls import fingerprint, host_of


def make_page(i: int, **kw: object) -> PageRecord:
    url = f"http://h{i % 3}.test/p/{i}?q={i}"
    fields: dict[str, object] = {"headers": {"Content-Type": "text/html", "Server": "nginx"}, "ip": "127.0.0.1"}
    fields.update(kw)
    body = (f"<html>{i}</html>".encode() + bytes(range(256))) * (i % 5 + 1)
    return PageRecord(url, fingerprint(url), url, 200, "text/html", body, 1_700_000_000.25 + i, **fields)  # type: ignore[arg-type]


def read_all(files: list[Path]) -> list[tuple[Path, dict[str, str], str | None, bytes]]:
    out = []
    for path in files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests=True):
                body = rec.content_stream().read()
                assert rec.digest_checker.passed is not False, rec.digest_checker.problems
                assert rec.rec_headers.protocol == "WARC/1.1"
                status = rec.http_headers.get_statuscode() if rec.http_headers and rec.rec_type == "response" else None
                out.append((path, dict(rec.rec_headers.headers), status, body))
    return out


def test_request_and_response_records_read_back(tmp_path: Path) -> None:
    pages = [
        make_page(1),
        make_page(2, headers={"Content-Encoding": "gzip", "Content-Length": "5", "X-A": "b"}, truncated=True),
        make_page(3, redirects=["http://h0.test/old"], ip="[::1]"),
    ]
    with WarcWriter(tmp_path) as writer:
        stats = writer.write_pages(pages)
    assert stats.pages == 3 and len(stats.files) == 1
    records = read_all(stats.files)
    assert records[0][1]["WARC-Type"] == "warcinfo"
    responses = [r for r in records if r[1]["WARC-Type"] == "response"]
    requests = [r for r in records if r[1]["WARC-Type"] == "request"]
    metadata = [r for r in records if r[1]["WARC-Type"] == "metadata"]
    assert len(responses) == len(requests) == 3 and len(metadata) == 1
    for page, (_, headers, status, body) in zip(pages, responses, strict=True):
        assert headers["WARC-Target-URI"] == page.url
        assert status == "200"
        assert body == page.body
        assert headers["WARC-Date"].startswith("2023-11-14T22:1")
    assert responses[1][1]["WARC-Truncated"] == "length"
    assert responses[2][1]["WARC-IP-Address"] == "::1"
    ids = {r[1]["WARC-Record-ID"] for r in responses}
    assert {r[1]["WARC-Concurrent-To"] for r in requests} == ids
    assert b"via: http://h0.test/old" in metadata[0][3]
    with open(stats.files[0], "rb") as fh:  # the stale encoding header is gone, the length is right
        raw = gzip.decompress(fh.read())
    assert b"Content-Encoding: gzip" not in raw and b"X-A: b" in raw
    assert f"Content-Length: {len(pages[1].body)}".encode() in raw


def test_rotation_by_size_keeps_each_page_in_one_file(tmp_path: Path) -> None:
    pages = [make_page(i) for i in range(40)]
    with WarcWriter(tmp_path, max_bytes=3000, prefix="rot") as writer:
        stats = writer.write_pages(pages)
    assert len(stats.files) > 3
    assert all(p.name.startswith("rot-") and p.name.endswith(".warc.gz") for p in stats.files)
    records = read_all(stats.files)
    per_file: dict[Path, list[str]] = {}
    for path, headers, _, _ in records:
        per_file.setdefault(path, []).append(headers["WARC-Type"])
    for types in per_file.values():
        assert types[0] == "warcinfo"
        assert types[1:] == ["response", "request"] * ((len(types) - 1) // 2)
    uris = [h["WARC-Target-URI"] for _, h, _, _ in records if h["WARC-Type"] == "response"]
    assert uris == [p.url for p in pages]
    assert verify(stats.files) == []


def test_warcio_check_accepts_the_files(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, max_bytes=5000) as writer:
        stats = writer.write_pages(make_page(i) for i in range(10))
    warcio = shutil.which("warcio", path=str(Path(sys.executable).parent))
    if warcio is None:
        pytest.skip("warcio CLI not installed")
    proc = subprocess.run([warcio, "check", "-v", *map(str, stats.files)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "digest pass" in proc.stdout


def test_export_cli_from_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = SqliteStore(tmp_path / "crawl.db")
    pages = [make_page(i) for i in range(12)]
    store.add_urls([UrlRecord(p.url, p.url_id, host_of(p.url), 0) for p in pages])
    store.record_results([Outcome(p.url, p.url_id, UrlState.DONE, 200, p.fetched_at, page=p) for p in pages])
    store.close()
    args = argparse.Namespace(store=f"sqlite:{tmp_path / 'crawl.db'}", out=str(tmp_path / "out"), max_bytes=4000,
                              prefix="exp", no_gzip=False, verify=True)  # fmt: skip
    assert export_warc(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["pages"] == 12 and result["verified"] is True and len(result["files"]) > 1
    bodies = {h["WARC-Target-URI"]: b for _, h, _, b in read_all([Path(f) for f in result["files"]])
              if h["WARC-Type"] == "response"}  # fmt: skip
    assert bodies == {p.url: p.body for p in pages}
