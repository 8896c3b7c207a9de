"""WARC request and response records from one exchange as it went over the wire (``fetchers.wire``).

Contracts:
- The request record's block is the request head exactly as sent. The response record's block is the
  response head as received (status line, header names in their case and order, repeated headers as
  separate lines) followed by the body as the headers describe it: content-coded (a gzip body stays
  gzip) and, when the headers say ``Transfer-Encoding: chunked``, framed again as chunks (the fetcher
  reads bodies de-chunked; the chunk boundaries on the wire are not kept, the bytes are).
- Blocks are written as they are: no header is rewritten. ``WARC-Block-Digest`` and
  ``WARC-Payload-Digest`` (sha1, base32; the payload is what follows the HTTP head, as warcio reads
  it) are computed here, so ``warcio check`` verifies both.
- The pair share ``WARC-Date`` (when the request was sent), ``WARC-Target-URI`` and ``WARC-IP-Address``;
  the request names the response in ``WARC-Concurrent-To``. A body cut short carries
  ``WARC-Truncated`` (length, time or disconnect). Every record names its file's warcinfo record.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from io import BytesIO

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date

from fetchers.wire import WireRecord

HTTP_REQUEST = "application/http; msgtype=request"
HTTP_RESPONSE = "application/http; msgtype=response"


def record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def warc_date(ts: float) -> str:
    return datetime_to_iso_date(datetime.fromtimestamp(ts, UTC).replace(tzinfo=None), use_micros=True)


def sha1_of(parts: Sequence[bytes]) -> str:
    h = hashlib.sha1()  # noqa: S324 - the WARC convention, not a security use
    for part in parts:
        h.update(part)
    return "sha1:" + base64.b32encode(h.digest()).decode("ascii")


def _chunked(wire: WireRecord) -> bool:
    te = wire.header(b"transfer-encoding")
    return te is not None and b"chunked" in te.lower()


def body_parts(wire: WireRecord) -> list[bytes]:
    """The response body as the record holds it (see the module docstring)."""
    payload = [p for p in wire.payload if p]
    if not _chunked(wire):
        return payload
    size = sum(len(p) for p in payload)
    if not size:
        return [b"0\r\n\r\n"]
    return [f"{size:x}\r\n".encode("ascii"), *payload, b"\r\n0\r\n\r\n"]


def _record(
    rec_type: str, uri: str, parts: list[bytes], content_type: str, headers: list[tuple[str, str]], payload_at: int
) -> ArcWarcRecord:
    """A record whose block is ``parts`` joined; the payload digest covers the block from ``payload_at``."""
    block = b"".join(parts)
    rec_headers = [
        ("WARC-Type", rec_type),
        ("WARC-Record-ID", record_id()),
        *headers,
        ("WARC-Target-URI", uri),
        ("Content-Type", content_type),
        ("WARC-Block-Digest", sha1_of([block])),
        ("WARC-Payload-Digest", sha1_of([block[payload_at:]])),
        ("Content-Length", str(len(block))),
    ]
    warc_headers = StatusAndHeaders("", rec_headers, protocol="WARC/1.1")
    return ArcWarcRecord("warc", rec_type, warc_headers, BytesIO(block), None, content_type, len(block))


def exchange_records(wire: WireRecord, *, warcinfo_id: str = "") -> Iterator[ArcWarcRecord]:
    """The response record, then its request record."""
    common = [("WARC-Date", warc_date(wire.date))]
    if wire.ip:
        common.append(("WARC-IP-Address", wire.ip.strip("[]")))
    if warcinfo_id:
        common.append(("WARC-Warcinfo-ID", warcinfo_id))
    head = wire.head
    resp_headers = list(common)
    if wire.truncated:
        resp_headers.append(("WARC-Truncated", wire.truncated))
    response = _record("response", wire.url, [head, *body_parts(wire)], HTTP_RESPONSE, resp_headers, len(head))
    yield response
    resp_id = response.rec_headers.get_header("WARC-Record-ID")
    req_headers = [*common, ("WARC-Concurrent-To", resp_id)]
    yield _record("request", wire.url, [wire.request], HTTP_REQUEST, req_headers, len(wire.request))
