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
- Unchanged re-fetches (issue #23) are ``revisit`` records instead of responses, block = the response
  head only: a 304 with profile ``server-not-modified``; a 200 whose payload digest equals the one
  ``earlier`` (the last response written for that URL) with profile ``identical-payload-digest``, its
  ``WARC-Payload-Digest`` the earlier payload's and ``WARC-Refers-To`` the earlier record.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date

from fetchers.wire import WireRecord

HTTP_REQUEST = "application/http; msgtype=request"
HTTP_RESPONSE = "application/http; msgtype=response"
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL_PAYLOAD = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


@dataclass(frozen=True, slots=True)
class Earlier:
    """The last response record written for a URL: its payload digest, WARC-Date and record id."""

    payload_digest: str
    date: str
    record_id: str


def status_of(wire: WireRecord) -> int:
    """The response's status code from its status line (0 when unreadable)."""
    parts = wire.status_line.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


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


def exchange_records(
    wire: WireRecord, *, warcinfo_id: str = "", earlier: Earlier | None = None
) -> Iterator[ArcWarcRecord]:
    """The response (or revisit) record, then its request record."""
    common = [("WARC-Date", warc_date(wire.date))]
    if wire.ip:
        common.append(("WARC-IP-Address", wire.ip.strip("[]")))
    if warcinfo_id:
        common.append(("WARC-Warcinfo-ID", warcinfo_id))
    head = wire.head
    resp_headers = list(common)
    if wire.truncated:
        resp_headers.append(("WARC-Truncated", wire.truncated))
    body = body_parts(wire)
    status = status_of(wire)
    payload_digest = sha1_of(body)
    if status == 304 or (status == 200 and earlier is not None and earlier.payload_digest == payload_digest):
        response = _revisit(wire, head, resp_headers, earlier, not_modified=status == 304)
    else:
        response = _record("response", wire.url, [head, *body], HTTP_RESPONSE, resp_headers, len(head))
    yield response
    resp_id = response.rec_headers.get_header("WARC-Record-ID")
    req_headers = [*common, ("WARC-Concurrent-To", resp_id)]
    yield _record("request", wire.url, [wire.request], HTTP_REQUEST, req_headers, len(wire.request))


def _revisit(
    wire: WireRecord, head: bytes, headers: list[tuple[str, str]], earlier: Earlier | None, *, not_modified: bool
) -> ArcWarcRecord:
    """A revisit record: the response head as received, naming the earlier capture when it is known."""
    refers = [("WARC-Profile", NOT_MODIFIED if not_modified else IDENTICAL_PAYLOAD),
              ("WARC-Refers-To-Target-URI", wire.url)]  # fmt: skip
    if earlier is not None:
        refers += [("WARC-Refers-To", earlier.record_id), ("WARC-Refers-To-Date", earlier.date)]
    block = head
    rec_headers = [
        ("WARC-Type", "revisit"),
        ("WARC-Record-ID", record_id()),
        *headers,
        *refers,
        ("WARC-Target-URI", wire.url),
        ("Content-Type", HTTP_RESPONSE),
        ("WARC-Block-Digest", sha1_of([block])),
    ]
    if earlier is not None and not not_modified:
        rec_headers.append(("WARC-Payload-Digest", earlier.payload_digest))
    rec_headers.append(("Content-Length", str(len(block))))
    warc_headers = StatusAndHeaders("", rec_headers, protocol="WARC/1.1")
    return ArcWarcRecord(
        "warc", "revisit", warc_headers, BytesIO(b""), _ExactHead(block), HTTP_RESPONSE, len(block), payload_length=0
    )


class _ExactHead(StatusAndHeaders):  # type: ignore[misc]
    """A revisit's block for warcio's writer, which writes only a revisit's HTTP head (``headers_buff``) and
    would rebuild it from parsed headers: kept byte for byte as received instead."""

    def __init__(self, head: bytes) -> None:
        super().__init__("", [], protocol="")
        self.headers_buff = head

    def compute_headers_buffer(self, header_filter: object = None) -> None:
        return None

    def __bool__(self) -> bool:  # warcio tests ``if record.http_headers`` (no status line parsed here)
        return True
