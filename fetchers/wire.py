"""One HTTP exchange as it went over the wire, for an archive (WARC): what a transport captures when the
fetcher is given an ``Archive``.

Contracts:
- ``request`` is the request head exactly as the transport wrote it to the socket (request line, every
  header in the order and case sent, the blank line). GET requests have no body.
- ``status_line`` and ``headers`` are the response head as received: header names keep their case,
  lines their order, repeated headers stay separate lines. Values are as the parser gave them (the
  whitespace around a value is not kept).
- ``payload`` is the response's message body after transfer decoding (no chunk framing) and before
  content decoding (a gzip body stays gzip), i.e. the bytes the headers describe. The archive writer
  frames it again when the headers say ``Transfer-Encoding: chunked``.
- ``truncated`` is "" for a whole body, else the WARC-Truncated reason ("length": the fetcher's body
  cap; "time": its total timeout; "disconnect": the body failed part way).

Capturing costs no copy of a body: an identity-coded payload is the very chunk list the decoder keeps
(``fetchers.body.BodyDecoder``), a content-coded one the list of raw chunks as read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class WireRecord:
    url: str
    ip: str
    date: float  # wall-clock seconds when the request was sent
    request: bytes
    status_line: bytes = b""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    payload: list[bytes] = field(default_factory=list)
    truncated: str = ""

    @property
    def head(self) -> bytes:
        """The response head as received, blank line included."""
        lines = [self.status_line] + [name + b": " + value for name, value in self.headers]
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def header(self, name: bytes) -> bytes | None:
        """The first value of response header ``name`` (case-insensitive), or None."""
        low = name.lower()
        for key, value in self.headers:
            if key.lower() == low:
                return value
        return None


# Called by the fetch engine once per exchange (each redirect hop, each retry, robots.txt included), on
# the fetcher's event loop. It must not raise for a fetch to count; the engine logs and goes on if it does.
Archive = Callable[[WireRecord], None]


def status_line(version: tuple[int, int], status: int, reason: str) -> bytes:
    line = f"HTTP/{version[0]}.{version[1]} {status}"
    return (line + f" {reason}" if reason else line).encode("latin-1", "replace")
