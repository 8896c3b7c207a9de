"""Incremental, capped body decoding: identity, gzip, deflate (zlib or raw) and brotli.

Bodies are read raw (aiohttp ``auto_decompress=False``, urllib3 ``decode_content=False``) and fed here
chunk by chunk. Output never grows past ``limit`` bytes: zlib is called with ``max_length`` and brotli
with ``output_buffer_limit``, so a decompression bomb costs at most ``limit`` bytes of memory plus one
input chunk, however large it would inflate.
"""

from __future__ import annotations

import zlib

import brotli

ACCEPT_ENCODING = "gzip, deflate, br"


class BodyDecoder:
    """Feed raw chunks with ``feed``; read ``body`` / ``truncated`` / ``error`` at the end.

    ``feed`` returns False once no more input is wanted (the cap was reached or the stream is broken),
    so the caller can stop reading and drop the connection. Never raises.
    """

    __slots__ = ("_parts", "_size", "_limit", "_mode", "_z", "_br", "_raw", "truncated", "error", "wire")

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
            if self._mode == "deflate":
                self._start_deflate(chunk)
            return self._feed_zlib(chunk)
        except (zlib.error, brotli.error) as exc:
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
