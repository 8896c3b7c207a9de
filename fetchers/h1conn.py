"""One HTTP/1.1 client connection of the lean transport (``fetchers.h1``): an asyncio protocol that sends a
GET and parses the response with llhttp (``httptools``, the parser family aiohttp's own C parser uses),
handing body bytes to the exchange's ``BodyDecoder`` as they arrive: no stream reader, no per-chunk
coroutine, one future per exchange.

The connection reports how its exchange ended through ``H1Conn.done`` (a future of an ``End``); the
transport turns that into an ``Exchange`` (error classes as ``fetchers.aio.classify`` gives them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import httptools

from fetchers.body import BodyDecoder

# How an exchange on a connection ended (``End.how``).
COMPLETE = "complete"  # the whole message was read
STOPPED = "stopped"  # the decoder would take no more (capped or undecodable): the connection is dropped
LOST = "lost"  # the connection ended before the message did
BAD = "bad"  # the response did not parse
TOO_LARGE = "too_large"  # the response head passed the byte limit
TIMEOUT = "timeout"


@dataclass(slots=True)
class End:
    how: str
    detail: str = ""
    error: BaseException | None = None


class _Stop(Exception):
    """Raised from a parser callback to stop parsing the buffer (the exchange has ended)."""


class H1Conn(asyncio.Protocol):
    """A keep-alive HTTP/1.1 connection; one exchange at a time (``begin`` ... ``done``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, max_head: int, on_closed: Callable[[H1Conn], None]) -> None:
        self.loop = loop
        self.max_head = max_head
        self.on_closed = on_closed
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.used = 0  # exchanges begun on this connection
        self.done: asyncio.Future[End] | None = None
        self._parser = httptools.HttpResponseParser(self)

    # --- one exchange ------------------------------------------------------------------------------
    def begin(self, request: bytes, body_limit: Callable[[int], int], keep_raw: bool) -> asyncio.Future[End]:
        """Send ``request``; ``body_limit(status)``: the decoded bytes to keep of the body."""
        self.used += 1
        self.done = self.loop.create_future()
        self.status = 0
        self.reason = b""
        self.version = (1, 1)
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.head_size = 0  # bytes of header lines parsed (name, value, ': ' and CRLF each)
        self.fed = 0  # bytes fed before the head was complete
        self.head_done = False
        self.complete = False
        self.head_at = 0.0
        self.keep_alive = False
        self.decoder: BodyDecoder | None = None
        self._body_limit, self._keep_raw = body_limit, keep_raw
        self.last_data = self.loop.time()
        assert self.transport is not None
        self.transport.write(request)
        return self.done

    def _end(self, end: End) -> None:
        done = self.done
        if done is not None and not done.done():
            done.set_result(end)

    def abort(self) -> None:
        """Drop the connection (an exchange that was cut short, a timeout, a cancellation)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # --- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        done = self.done
        if done is None or done.done():  # bytes nobody asked for (a server talking out of turn)
            self.abort()
            return
        self.last_data = self.loop.time()
        if not self.head_done:
            self.fed += len(data)
        try:
            self._parser.feed_data(data)
            if not self.head_done and self.fed > 2 * self.max_head + 65536:
                # llhttp keeps an unfinished header line in memory: never let one grow without bound
                self._end(End(TOO_LARGE, f"more than {self.max_head} bytes of response head"))
                self.abort()
        except httptools.HttpParserCallbackError:
            if not done.done():  # a callback of ours failed: not the server's fault, but the exchange ends
                self._end(End(BAD, "response callback failed"))
            self.abort()
        except httptools.HttpParserUpgrade:
            self._end(End(BAD, "unexpected protocol upgrade"))
            self.abort()
        except httptools.HttpParserError as exc:
            self._end(End(BAD, str(exc), exc))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        done = self.done
        if done is not None and not done.done():
            if self.head_done and self.decoder is not None and self._eof_body():
                self._end(End(COMPLETE))  # a body delimited by the end of the connection
            else:
                self._end(End(LOST, "" if exc is None else f"{type(exc).__name__}: {exc}", exc))
        self.on_closed(self)

    def _eof_body(self) -> bool:
        """True when the body runs to the end of the connection (no Content-Length, not chunked)."""
        for name, value in self.raw_headers:
            low = name.lower()
            if low == b"content-length" or (low == b"transfer-encoding" and b"chunked" in value.lower()):
                return False
        return True

    # --- llhttp callbacks ----------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.complete:  # bytes after the answer: a server talking out of turn ends the connection
            raise _Stop

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_size += len(name) + len(value) + 4
        if self.head_size > self.max_head:
            self._end(End(TOO_LARGE, f"{self.head_size} bytes of response headers (max {self.max_head})"))
            raise _Stop
        self.raw_headers.append((name, value.strip()))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # an interim response (100 Continue): its final one follows
            self.raw_headers, self.reason, self.head_size = [], b"", 0
            return
        self.status = status
        major, _, minor = self._parser.get_http_version().partition(".")
        self.version = (int(major or 1), int(minor or 1))
        self.head_done, self.head_at = True, self.loop.time()
        encoding = ""
        for name, value in self.raw_headers:
            if name.lower() == b"content-encoding":
                encoding = value.decode("latin-1")
                break
        self.decoder = BodyDecoder(encoding, self._body_limit(status), keep_raw=self._keep_raw)

    def on_body(self, body: bytes) -> None:
        decoder = self.decoder
        if decoder is not None and not decoder.feed(body):
            self._end(End(STOPPED))
            raise _Stop

    def on_message_complete(self) -> None:
        if not self.head_done:
            return  # the end of an interim response
        self.keep_alive = self._parser.should_keep_alive()
        self.complete = True
        self._end(End(COMPLETE))
