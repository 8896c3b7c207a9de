"""Incremental, capped body decoding: identity, gzip, deflate (zlib or raw), brotli and zstd.

Bodies are read raw (aiohttp ``auto_decompress=False``, urllib3 ``decode_content=False``) and fed here
chunk by chunk. Output never grows past ``limit`` bytes: zlib is called with ``max_length``, brotli
with ``output_buffer_limit``, and zstd (the ``zstandard`` package) writes into a sink that stops the
decoder once the cap is passed, at most ``ZSTD_STEP`` bytes later. So a decompression bomb costs at most
``limit`` bytes of memory plus one input chunk and one step, however large it would inflate. A zstd frame
may also ask for a large window (the decoder's own buffer): windows above ``ZSTD_MAX_WINDOW`` (8 MiB, the
limit RFC 9659 sets for ``Content-Encoding: zstd``) are refused as a decode error.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import brotli
import zstandard

ACCEPT_ENCODING = "gzip, deflate, br, zstd"
ZSTD_MAX_WINDOW = 8 * 1024 * 1024  # RFC 9659 section 3: HTTP zstd windows are at most 8 MiB
ZSTD_STEP = 64 * 1024  # zstd output is produced (and checked against the cap) in steps of this size


class _Capped(Exception):
    """Raised by the zstd sink once the cap is passed, to stop the decoder mid-input."""


class _ZstdSink:
    """Where ``zstandard``'s stream writer puts decoded bytes: kept by the decoder up to its cap."""

    __slots__ = ("_keep",)

    def __init__(self, keep: Callable[[bytes], bool]) -> None:
        self._keep = keep

    def write(self, data: bytes) -> int:
        if not self._keep(bytes(data)):
            raise _Capped
        return len(data)


class BodyDecoder:
    """Feed raw chunks with ``feed``; read ``body`` / ``truncated`` / ``error`` at the end.

    ``feed`` returns False once no more input is wanted (the cap was reached or the stream is broken),
    so the caller can stop reading and drop the connection. Never raises.
    """

    __slots__ = ("_parts", "_size", "_limit", "_mode", "_z", "_br", "_zst", "_raw", "truncated", "error", "wire")

    def __init__(self, content_encoding: str, limit: int, *, keep_raw: bool = False) -> None:
        """``keep_raw``: also keep the chunks as fed, for an archive (``raw``)."""
        self._parts: list[bytes] = []
        self._size = 0
        self._limit = limit
        self.truncated = False
        self.error = ""
        self.wire = 0
        self._z: zlib._Decompress | None = None
        self._br: brotli.Decompressor | None = None
        self._zst: zstandard.ZstdDecompressionWriter | None = None
        enc = content_encoding.strip().lower() if content_encoding else ""
        if enc in ("", "identity"):
            self._mode = "identity"
        elif enc in ("gzip", "x-gzip"):
            self._mode = "zlib"
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self._mode = "deflate"  # zlib-wrapped per RFC 9110, raw deflate from some servers; decided on data
        elif enc == "br":
            self._mode = "br"
            self._br = brotli.Decompressor()
        elif enc == "zstd":
            self._mode = "zstd"
            dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
            sink: Any = _ZstdSink(self._keep)  # the writer calls only write(); typed IO[bytes]
            self._zst = dctx.stream_writer(sink, write_size=ZSTD_STEP, write_return_read=True)
        else:
            self._mode = "identity"
            self.error = f"unsupported content-encoding {enc!r}; body kept encoded"
        # An identity body's kept parts are the chunks as fed: an archive reads those, no second list.
        self._raw: list[bytes] | None = [] if keep_raw and self._mode != "identity" else None

    @property
    def size(self) -> int:
        return self._size

    @property
    def raw(self) -> list[bytes]:
        """The chunks as fed (identity: as kept, so cut at the cap), when made with ``keep_raw``."""
        return self._parts if self._raw is None else self._raw

    @property
    def body(self) -> bytes:
        return self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)

    def _keep(self, data: bytes) -> bool:
        room = self._limit - self._size
        if len(data) > room:
            data = data[:room]
            self.truncated = True
        if data:
            self._parts.append(data)
            self._size += len(data)
        return not self.truncated

    def feed(self, chunk: bytes) -> bool:
        self.wire += len(chunk)
        if self._raw is not None and not self.truncated:
            self._raw.append(chunk)
        if self.truncated or (self.error and self._mode != "identity"):
            return False
        if self._mode == "identity":
            return self._keep(chunk)
        try:
            if self._mode == "br":
                return self._feed_br(chunk)
            if self._mode == "zstd":
                return self._feed_zstd(chunk)
            if self._mode == "deflate":
                self._start_deflate(chunk)
            return self._feed_zlib(chunk)
        except (zlib.error, brotli.error, zstandard.ZstdError) as exc:
            self.error = f"{self._mode} decode failed: {exc}"
            return False

    def _start_deflate(self, chunk: bytes) -> None:
        # A zlib stream starts with a header whose first 16 bits are a multiple of 31 (RFC 1950).
        raw = len(chunk) < 2 or (chunk[0] & 0x0F) != 8 or ((chunk[0] << 8) | chunk[1]) % 31 != 0
        self._z = zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
        self._mode = "zlib"

    def _feed_zlib(self, chunk: bytes) -> bool:
        z = self._z
        assert z is not None
        if z.eof:
            return True  # trailing bytes after the end of the stream are ignored
        # Ask for one byte more than fits: getting it proves the body is longer than the cap.
        out = z.decompress(chunk, self._limit - self._size + 1)
        return self._keep(out)

    def _feed_br(self, chunk: bytes) -> bool:
        br = self._br
        assert br is not None
        room = self._limit - self._size + 1
        out = br.process(chunk, output_buffer_limit=room)
        if not self._keep(out):
            return False
        while not br.can_accept_more_data():  # output pending; drain it in capped steps
            out = br.process(b"", output_buffer_limit=self._limit - self._size + 1)
            if not out or not self._keep(out):
                return not self.truncated
        return True

    def _feed_zstd(self, chunk: bytes) -> bool:
        zst = self._zst
        assert zst is not None
        try:
            zst.write(chunk)  # the sink keeps the output; concatenated frames decode one after another
        except _Capped:
            return False
        return True
