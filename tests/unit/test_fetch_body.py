"""BodyDecoder: encodings, caps, bombs (memory bounded), broken streams."""

from __future__ import annotations

import gzip
import os
import tracemalloc
import zlib

import brotli
import zstandard

from fetchers.body import BodyDecoder

PAGE = b"<html><body>" + b"hello crawl " * 4000 + b"</body></html>"


def _feed(dec: BodyDecoder, data: bytes, step: int = 4096) -> None:
    for i in range(0, len(data), step):
        if not dec.feed(data[i : i + step]):
            break


def test_identity_and_cap() -> None:
    d = BodyDecoder("", 1000)
    _feed(d, PAGE)
    assert d.body == PAGE[:1000] and d.truncated and not d.error
    d = BodyDecoder("identity", len(PAGE))
    _feed(d, PAGE)
    assert d.body == PAGE and not d.truncated


def test_gzip_deflate_br() -> None:
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = raw_deflate.compress(PAGE) + raw_deflate.flush()
    for enc, data in [
        ("gzip", gzip.compress(PAGE)),
        ("x-gzip", gzip.compress(PAGE)),
        ("deflate", zlib.compress(PAGE)),
        ("deflate", raw),  # raw deflate, as some servers send it
        ("br", brotli.compress(PAGE)),
        ("GZIP ", gzip.compress(PAGE)),
    ]:
        d = BodyDecoder(enc, 10 * len(PAGE))
        _feed(d, data, step=333)
        assert d.body == PAGE and not d.truncated and not d.error, enc
        assert d.wire == len(data)


def test_compressed_cap() -> None:
    for enc, data in [("gzip", gzip.compress(PAGE)), ("br", brotli.compress(PAGE))]:
        d = BodyDecoder(enc, 5000)
        _feed(d, data)
        assert d.truncated and d.body == PAGE[:5000], enc


def _bounded_peak(enc: str, bomb: bytes, limit: int) -> int:
    tracemalloc.start()
    try:
        d = BodyDecoder(enc, limit)
        _feed(d, bomb, step=64 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert d.truncated and len(d.body) == limit
    return peak


def test_gzip_bomb_memory_bounded() -> None:
    # 256 MiB of zeros compresses to ~250 KB; the decoder must stop at the cap without inflating it.
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    bomb = b"".join(c.compress(chunk) for _ in range(256)) + c.flush()
    assert len(bomb) < 2 << 20
    peak = _bounded_peak("gzip", bomb, 1 << 20)
    assert peak < 8 << 20  # a few times the cap, never the 256 MiB


def test_brotli_bomb_memory_bounded() -> None:
    bomb = brotli.compress(bytes(64 << 20), quality=1)
    assert len(bomb) < 1 << 20
    peak = _bounded_peak("br", bomb, 1 << 20)
    assert peak < 8 << 20


def test_corrupt_and_unknown() -> None:
    d = BodyDecoder("gzip", 1 << 20)
    assert d.feed(gzip.compress(PAGE)[:100]) is True
    assert d.feed(os.urandom(2000)) is False
    assert d.error.startswith("zlib decode failed")
    d = BodyDecoder("br", 1 << 20)
    d.feed(b"\xff" * 100)
    assert d.error
    d = BodyDecoder("compress", 100)
    d.feed(b"abc")
    assert d.body == b"abc" and "unsupported" in d.error


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


def test_zstd_streamed_frames_and_cap() -> None:
    # A streamed frame (no content size in its header) cut into odd pieces; two frames back to back.
    c = zstandard.ZstdCompressor().compressobj()
    streamed = c.compress(PAGE) + c.flush()
    for data in (streamed, _zstd(PAGE), _zstd(PAGE[:1000]) + _zstd(PAGE[1000:])):
        d = BodyDecoder("zstd", 10 * len(PAGE))
        _feed(d, data, step=333)
        assert d.body == PAGE and not d.truncated and not d.error
        assert d.wire == len(data)
    d = BodyDecoder("zstd", 5000)
    _feed(d, _zstd(PAGE))
    assert d.truncated and d.body == PAGE[:5000]


def test_zstd_bomb_memory_bounded() -> None:
    c = zstandard.ZstdCompressor(level=3).compressobj()
    bomb = b"".join(c.compress(bytes(1 << 20)) for _ in range(256)) + c.flush()
    assert len(bomb) < 1 << 20
    peak = _bounded_peak("zstd", bomb, 1 << 20)
    assert peak < 8 << 20


def test_zstd_window_above_rfc9659_limit_is_refused() -> None:
    # A frame that asks for a 64 MiB window would make the decoder allocate it: refused, not decoded.
    big_window = zstandard.ZstdCompressor(
        compression_params=zstandard.ZstdCompressionParameters(window_log=26)
    ).compressobj()
    data = big_window.compress(os.urandom(1 << 16) * 4) + big_window.flush()
    d = BodyDecoder("zstd", 1 << 20)
    assert d.feed(data) is False
    assert d.error.startswith("zstd decode failed") and d.body == b""


def test_zstd_corrupt() -> None:
    d = BodyDecoder("zstd", 1 << 20)
    assert d.feed(b"not a zstd frame at all") is False
    assert d.error.startswith("zstd decode failed")
