"""A message's body field decoded (``fetchers.bodycodec``): each bad field is one ``SchemaError`` naming
the field once, a body over the limit is refused before it is unpacked."""

from __future__ import annotations

import base64

import pytest

from fetchers.bodycodec import decode_body, encode_body
from fetchers.schema import SchemaError


def test_a_body_round_trips_in_both_codecs() -> None:
    for codec in ("lz4", "zlib"):
        name, text = encode_body(b"<html>x</html>" * 50, codec=codec)
        assert decode_body({name: text}, 1 << 20) == b"<html>x</html>" * 50


@pytest.mark.parametrize(("packed", "message"), [
    ((1 << 30).to_bytes(4, "little") + b"\x00" * 8, "body_lz4: declared size over the limit"),
    (b"\x01\x02", "body_lz4: shorter than its size header"),
])  # fmt: skip
def test_a_bad_lz4_body_is_one_error_naming_the_field_once(packed: bytes, message: str) -> None:
    with pytest.raises(SchemaError) as err:
        decode_body({"body_lz4": base64.b64encode(packed).decode()}, 1 << 20)
    assert str(err.value) == message


def test_junk_base64_and_a_broken_block_are_errors_of_their_field() -> None:
    with pytest.raises(SchemaError, match=r"^body_lz4: (?!body_lz4)"):
        decode_body({"body_lz4": "not base64!"}, 1 << 20)
    with pytest.raises(SchemaError, match=r"^body_lz4: (?!body_lz4)"):
        decode_body({"body_lz4": base64.b64encode((100).to_bytes(4, "little") + b"\xff" * 10).decode()}, 1 << 20)
