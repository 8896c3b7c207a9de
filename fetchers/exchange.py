"""The transport seam: one HTTP exchange (no redirects followed) as a record, the protocol a transport
implements (aiohttp in ``fetchers.aio``, requests-futures in ``fetchers.threaded``), and small pure helpers
both sides share.

``SEND_FENCE``: the batch's fence for the exchange under way (set by ``fetchers.retrying``). The fence is
asked before each request; every transport whose request waits on a new connection asks it again once
connected, before the request is written (``fetchers.h1``, ``fetchers.aio``, ``fetchers.threaded``), since a process stopped while connecting would otherwise send, after it
continues, a request its batch no longer allows (another node may be fetching that URL by then).

``SENT``: called by the transport as its request goes to the socket, on a pooled connection as on a new
one (``fetchers.h1`` right after the write; ``fetchers.aio`` and ``fetchers.threaded`` once the connection
is in hand, just before it): the host's gap counts from the send, not from the pacer's grant (the code
between them can be held up on a loaded machine, by the GIL or a lock, and the next grant is not).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

from fetchers.guard import SsrfBlocked
from fetchers.redirects import REDIRECT_STATUSES  # noqa: F401 - the transports read it here
from fetchers.wire import Archive, WireRecord

log = logging.getLogger(__name__)

SEND_FENCE: ContextVar[Callable[[], bool] | None] = ContextVar("crawlfleet_send_fence", default=None)
SENT: ContextVar[Callable[[], None] | None] = ContextVar("crawlfleet_sent", default=None)


@dataclass(slots=True)
class Exchange:
    """One HTTP request and its response (or failure), as a transport reports it."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = ""
    body: bytes = b""
    truncated: bool = False
    wire_bytes: int = 0
    ip: str = ""
    connect_s: float = 0.0
    ttfb_s: float = 0.0
    error_class: str = ""
    error_message: str = ""
    retryable: bool = False  # the failure happened before any response; another try may succeed
    wire: WireRecord | None = None  # the exchange as sent and received, when the transport captures (fetchers.wire)


class Transport(Protocol):
    """A transport made to capture fills ``Exchange.wire`` for every exchange that got a response head."""

    async def exchange(self, url: str, host: str, ip: str, *, max_body: int) -> Exchange:
        """GET ``url`` (connecting to ``ip``, already SSRF-checked); read at most ``max_body`` decoded
        bytes. Never raises except CancelledError."""
        ...


def hand_over(ex: Exchange, archive: Archive) -> None:
    """Give ``ex.wire`` to the archive and drop it from the exchange (the result does not carry it on).
    An archive failure is logged: it must not cost the fetch."""
    wire, ex.wire = ex.wire, None
    if wire is None:
        return
    try:
        archive(wire)
    except Exception:
        log.exception("archiving %s failed", wire.url)


def dns_error_class(exc: BaseException) -> str:
    """Map a resolver failure to an error_class (our DNS layer's ``kind`` when it has one)."""
    if isinstance(exc, SsrfBlocked):
        return "ssrf_blocked"
    kind = getattr(exc, "kind", None)
    if isinstance(kind, str) and kind:
        return "dns_nxdomain" if kind == "no_address" else f"dns_{kind}"
    if isinstance(exc, TimeoutError):
        return "dns_timeout"
    msg = str(exc).lower()
    if "timeout" in msg or "timed out" in msg or "temporary failure" in msg:
        return "dns_timeout"
    return "dns_nxdomain"


def split_host(host: str) -> tuple[str, int]:
    """``name[:port]`` (IPv6 in brackets) -> (name, port); port 80 when absent (we see http here)."""
    if host.startswith("["):
        end = host.find("]")
        name, rest = host[1:end], host[end + 1 :]
        return name, int(rest[1:]) if rest.startswith(":") else 80
    name, sep, port = host.rpartition(":")
    if sep and port.isdigit():
        return name, int(port)
    return host, 80


def is_ip_literal(name: str) -> bool:
    if ":" in name:
        return True
    last = name.rpartition(".")[2]
    return last.isdigit()  # a DNS name's last label (a TLD) is never all digits
