"""Strict reading of a JSON message's fields: ``SchemaError`` and the typed getters the records use.

A message off the wire is hostile until read: every getter checks the field's type (an int field takes no
bool, a float field takes no NaN, infinity or out-of-range integer, a text takes no lone surrogate) and
raises ``SchemaError`` (a ``ValueError``) naming the field, so a bad message is rejected before use.
"""

from __future__ import annotations

from typing import Any


class SchemaError(ValueError):
    """A message does not match the record schema."""


def require(cond: bool, what: str) -> None:
    if not cond:
        raise SchemaError(what)


def field_of(obj: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """``obj[name]``, which must be there and of type ``kind``."""
    if name not in obj:
        raise SchemaError(f"missing field {name!r}")
    value = obj[name]
    # bool is an int subclass; an int field must not accept True/False and vice versa.
    if isinstance(value, bool) and kind is not bool:
        raise SchemaError(f"field {name!r} has type bool")
    if not isinstance(value, kind):
        raise SchemaError(f"field {name!r} has type {type(value).__name__}")
    return value


def text_ok(text: str) -> bool:
    """Encodable as UTF-8: JSON allows lone surrogates (\\ud800), which break hashing and I/O later."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def to_float(value: Any, what: str) -> float:
    try:
        out = float(value)
    except OverflowError as exc:  # a huge JSON integer
        raise SchemaError(f"{what}: out of range") from exc
    if out != out or out in (float("inf"), float("-inf")):
        raise SchemaError(f"{what}: not finite")
    return out


def finite_field(obj: dict[str, Any], name: str) -> float:
    """``obj[name]``: a JSON number, as a finite float."""
    return to_float(field_of(obj, name, (int, float)), name)
