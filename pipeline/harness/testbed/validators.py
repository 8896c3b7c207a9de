"""HTTP validators of the living web: ETag, Last-Modified and the 304 decision (RFC 9110 13.1). Pure.

- ``digest(body)``: ``sha1:`` + base32 of the body as served (uncompressed): the form of a WARC
  payload digest; the truth reports it and ``etag`` is derived from it.
- ``etag(body)``: a strong ETag, ``"`` + first 20 chars of the digest's base32 + ``"``.
- ``http_date(wall)`` / ``parse_http_date(text)``: IMF-fixdate; the parser also takes RFC 850 and
  asctime forms (``email.utils``) and returns None for anything else.
- ``not_modified(...)``: If-None-Match wins when present (weak comparison, ``*``, lists); otherwise
  If-Modified-Since, compared at whole seconds, as HTTP dates carry no fraction.
"""

from __future__ import annotations

import base64
import hashlib
import math
from email.utils import formatdate, parsedate_to_datetime


def digest(body: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


def etag(body: bytes) -> str:
    return '"' + digest(body)[5:25] + '"'


def http_date(wall: float) -> str:
    return formatdate(math.floor(wall), usegmt=True)


def parse_http_date(text: str) -> float | None:
    try:
        dt = parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if dt is None or dt.tzinfo is None:
        return None
    try:
        return dt.timestamp()
    except (OverflowError, ValueError, OSError):
        return None


def _etags(header: str) -> list[str]:
    return [t.strip().removeprefix("W/") for t in header.split(",") if t.strip()]


def not_modified(
    *, tag: str, modified_wall: float, if_none_match: str | None, if_modified_since: str | None
) -> bool:
    """Whether a GET with these request headers gets 304 for a representation with ``tag`` and
    Last-Modified ``modified_wall``."""
    if if_none_match is not None:
        tags = _etags(if_none_match)
        return "*" in tags or tag.removeprefix("W/") in tags
    if if_modified_since is not None:
        since = parse_http_date(if_modified_since)
        return since is not None and math.floor(modified_wall) <= since
    return False
