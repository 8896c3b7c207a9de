"""WARC revisit records for unchanged re-fetches (#23 point 6): a 304 is a server-not-modified revisit, a 200
with the payload last written for its URL an identical-payload-digest revisit; `warcio check` accepts both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from fetchers.wire import WireRecord, status_line
from pipeline.storage.warc import WarcWriter
from pipeline.storage.warcwire import IDENTICAL_PAYLOAD, NOT_MODIFIED

URL = "http://a.test/p"
REQUEST = b"GET /p HTTP/1.1\r\nHost: a.test\r\n\r\n"
CONDITIONAL = b'GET /p HTTP/1.1\r\nHost: a.test\r\nIf-None-Match: "v1"\r\n\r\n'


def wire(status: int, body: bytes, *, t: float, request: bytes = REQUEST) -> WireRecord:
    headers = ((b"ETag", b'"v1"'),) + (
        ((b"Content-Length", str(len(body)).encode()),) if status == 200 else ()
    )
    reason = "OK" if status == 200 else "Not Modified"
    return WireRecord(
        URL, "127.0.0.1", t, request, status_line((1, 1), status, reason), headers, [body] if body else []
    )


def test_unchanged_refetches_become_revisit_records(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, gzip=False) as w:
        w.write_exchange(wire(200, b"<html>v1</html>", t=1_700_000_000.0))
        w.write_exchange(wire(304, b"", t=1_700_000_010.0, request=CONDITIONAL))
        w.write_exchange(wire(200, b"<html>v1</html>", t=1_700_000_020.0))  # a server ignoring validators
        w.write_exchange(wire(200, b"<html>v2</html>", t=1_700_000_030.0))
        files = list(w.stats.files)
    records = []
    for f in files:
        with open(f, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests=True):
                assert rec.digest_checker.passed is not False, rec.digest_checker.problems
                if rec.rec_type in ("response", "revisit"):
                    h = rec.rec_headers
                    records.append((rec.rec_type, h.get_header("WARC-Profile"), h.get_header("WARC-Refers-To"),
                                    h.get_header("WARC-Record-ID"), h.get_header("WARC-Payload-Digest")))  # fmt: skip
    kinds = [(kind, profile) for kind, profile, *_ in records]
    assert kinds == [
        ("response", None),
        ("revisit", NOT_MODIFIED),
        ("revisit", IDENTICAL_PAYLOAD),
        ("response", None),
    ]
    first_id, first_digest = records[0][3], records[0][4]
    assert records[1][2] == first_id and records[2][2] == first_id  # both name the capture they repeat
    assert records[2][4] == first_digest
    warcio = str(Path(sys.executable).with_name("warcio"))
    proc = subprocess.run(
        [warcio, "check", "-v", *map(str, files)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
