"""WARC records from wire captures (pipeline.storage.warcwire) and the capture side of BodyDecoder."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from fetchers.body import BodyDecoder
from fetchers.wire import WireRecord, status_line
from pipeline.settings import Settings
from pipeline.storage.warc import WarcWriter
from pipeline.storage.warcinfo import crawl_info, operator_of
from pipeline.storage.warcwire import body_parts

REQUEST = b"GET /p HTTP/1.1\r\nHost: a.test\r\nUser-Agent: Bot/1\r\n\r\n"


def wire(headers: list[tuple[bytes, bytes]], payload: list[bytes], *, truncated: str = "") -> WireRecord:
    return WireRecord("http://a.test/p", "127.0.0.1", 1_700_000_000.5, REQUEST, status_line((1, 1), 200, "OK"),
                      tuple(headers), payload, truncated)  # fmt: skip


def test_head_keeps_case_order_and_repeats() -> None:
    w = wire([(b"X-B", b"2"), (b"set-COOKIE", b"a=1"), (b"Set-Cookie", b"b=2")], [])
    assert w.head == b"HTTP/1.1 200 OK\r\nX-B: 2\r\nset-COOKIE: a=1\r\nSet-Cookie: b=2\r\n\r\n"
    assert w.header(b"set-cookie") == b"a=1" and w.header(b"nope") is None
    assert status_line((1, 0), 404, "") == b"HTTP/1.0 404"


def test_chunked_bodies_are_framed_again() -> None:
    assert body_parts(wire([(b"Content-Length", b"3")], [b"ab", b"c"])) == [b"ab", b"c"]
    chunked = wire([(b"Transfer-Encoding", b"Chunked")], [b"ab", b"", b"c"])
    assert b"".join(body_parts(chunked)) == b"3\r\nabc\r\n0\r\n\r\n"
    assert body_parts(wire([(b"transfer-encoding", b"chunked")], [])) == [b"0\r\n\r\n"]


def test_body_decoder_keeps_raw_chunks_without_copying_identity() -> None:
    ident = BodyDecoder("", 10, keep_raw=True)
    chunk = b"12345678"
    ident.feed(chunk)
    assert ident.raw[0] is chunk  # the kept part is the raw chunk: nothing is held twice
    ident.feed(b"abcdef")
    assert b"".join(ident.raw) == b"12345678ab" and ident.truncated
    zipped = gzip.compress(b"hello " * 100)
    dec = BodyDecoder("gzip", 1 << 20, keep_raw=True)
    dec.feed(zipped[:10])
    dec.feed(zipped[10:])
    assert b"".join(dec.raw) == zipped and dec.body == b"hello " * 100
    assert BodyDecoder("deflate", 100, keep_raw=False).raw == []  # nothing kept unless asked
    raw_deflate = BodyDecoder("deflate", 100, keep_raw=True)
    raw_deflate.feed(zlib.compress(b"x" * 50))
    assert raw_deflate.body == b"x" * 50 and raw_deflate.raw


def test_written_records_verify_and_pair(tmp_path: Path) -> None:
    body = gzip.compress(b"<html>hi</html>")
    w = wire([(b"Content-Encoding", b"gzip"), (b"content-length", str(len(body)).encode())], [body[:5], body[5:]],
             truncated="length")  # fmt: skip
    settings = Settings()
    with WarcWriter(tmp_path, info=crawl_info(settings, description="unit")) as writer:
        writer.write_exchange(w)
    assert writer.stats.exchanges == 1 and writer.stats.records == 3
    with open(writer.stats.files[0], "rb") as fh:
        records = []
        for rec in ArchiveIterator(fh, check_digests=True):
            content = rec.content_stream().read()
            assert rec.digest_checker.passed is not False, rec.digest_checker.problems
            records.append((rec.rec_type, rec.rec_headers, rec.http_headers, content))
    (info, _, _, fields), (rtype, rh, http, content), (qtype, qh, _, _) = records
    assert (info, rtype, qtype) == ("warcinfo", "response", "request")
    assert b"description: unit\r\n" in fields and b"robots: obey\r\n" in fields
    assert rh.get_header("WARC-Truncated") == "length" and rh.get_header("WARC-IP-Address") == "127.0.0.1"
    assert qh.get_header("WARC-Concurrent-To") == rh.get_header("WARC-Record-ID")
    assert qh.get_header("WARC-Date") == rh.get_header("WARC-Date") == "2023-11-14T22:13:20.500000Z"
    assert http.get_header("Content-Encoding") == "gzip" and content == b"<html>hi</html>"  # warcio decodes it


def test_operator_comes_from_the_user_agent_comment() -> None:
    assert operator_of("Bot/1 (+https://b.example/; ops@b.example; Linux)") == "+https://b.example/; ops@b.example"
    assert operator_of("Bot/1") == ""
    info = crawl_info(Settings())
    assert info["robots"] == "obey" and '"fleet"' not in info["crawlfleet-settings"]  # no broker credentials
