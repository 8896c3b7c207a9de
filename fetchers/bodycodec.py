"""How a page body travels inside a record: compressed, then base64-encoded into one JSON field.

``body_z`` (zlib level 1) is the wire default, small; ``body_lz4`` (lz4 block, size stored) is about 4x
cheaper to write and is what the crawler's own journal uses, where CPU per page matters more than bytes.
Readers accept either. Decoding is bounded: a body that would inflate past ``max_body_bytes`` is refused
(a zlib bomb is cut at the limit, an LZ4 block declaring a larger size is not decompressed).
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

import lz4.block

from fetchers.schema import SchemaError, field_of


def pack_lz4(body: bytes) -> bytes:
    """``body`` in the journal's LZ4 form (lz4.block, size stored); b"" stays b""."""
    return lz4.block.compress(body, store_size=True) if body else b""


def unpack_lz4(packed: bytes) -> bytes:
    """The inverse of ``pack_lz4``. Raises ``lz4.block.LZ4BlockError`` (a ``ValueError``) on junk."""
    return bytes(lz4.block.decompress(packed)) if packed else b""


def encode_body(body: bytes, codec: str, packed: bytes | None = None) -> tuple[str, str]:
    """(field name, base64 text) for ``body``: codec "lz4" gives ``body_lz4`` (``packed``: the body already
    compressed with ``pack_lz4``, used as is), any other ``body_z``. An empty body gives ""."""
    if codec == "lz4":
        name = "body_lz4"
        raw = pack_lz4(body) if packed is None else packed
    else:
        name = "body_z"
        raw = zlib.compress(body, 1) if body else b""
    return name, base64.b64encode(raw).decode("ascii") if raw else ""


def decode_body(obj: dict[str, Any], max_body_bytes: int) -> bytes:
    """The body a message's ``body_lz4`` or ``body_z`` field holds; ``SchemaError`` on junk or on a body
    over ``max_body_bytes``."""
    if "body_lz4" in obj:
        raw = field_of(obj, "body_lz4", str)
        if not raw:
            return b""
        try:
            packed = base64.b64decode(raw, validate=True)
        except ValueError as exc:
            raise SchemaError(f"body_lz4: {exc}") from exc
        if len(packed) < 4:
            raise SchemaError("body_lz4: shorter than its size header")
        if int.from_bytes(packed[:4], "little") > max_body_bytes:
            raise SchemaError("body_lz4: declared size over the limit")
        try:
            return unpack_lz4(packed)
        except (ValueError, lz4.block.LZ4BlockError) as exc:
            raise SchemaError(f"body_lz4: {exc}") from exc
    raw = field_of(obj, "body_z", str)
    if not raw:
        return b""
    try:
        # max_length bounds the output: a zlib bomb in a message cannot blow memory.
        return zlib.decompressobj().decompress(base64.b64decode(raw, validate=True), max_body_bytes)
    except (ValueError, zlib.error) as exc:
        raise SchemaError(f"body_z: {exc}") from exc
