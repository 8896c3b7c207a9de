"""S1's bottom-level DNS server, shared by the fleet's nodes, holding S2's dqcache.

The fleet's three layers (S1): each node's own :class:`CachingResolver` (S4's LRU and refresh
period) asks this server; this server answers from its dqcache or asks the one upper-level server
(unbound), the only layer that talks to the outside. The dqcache is a :class:`CachingResolver` with
S2's semantics: the BCTuple positive cache (:mod:`pipeline.dns.positive`), the Bloom negative cache
cleared on one TTL (:mod:`pipeline.dns.negative`), TTLs clamped (minimum raised, maximum cut) and no
refresh period: an entry lives exactly its clamped TTL, and the TTL a node sees is what remains.

Serving: UDP, and TCP for replies that do not fit a datagram (:mod:`pipeline.dns.wire`). Every
query is one task; at most ``max_pending`` are in progress, beyond that a datagram is dropped and
counted (the client's retry comes later), so a flood cannot grow memory without bound.

What can reach the cache is only what :class:`AresResolver` accepts from the upper layer: c-ares
discards replies with a wrong ID or a different question and retries truncated ones over TCP, and
only address records owned by the asked name (or its CNAME chain) are kept. Failures of the upper
layer (SERVFAIL, timeouts, refusals, garbage) are passed on as SERVFAIL and never cached here; an
NXDOMAIN or NODATA goes to the negative cache, whose flood guard keeps its false-positive rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from dnslib import DNSRecord

from pipeline.dns.cache_resolver import CachingResolver
from pipeline.dns.errors import DnsError
from pipeline.dns.negative import NegativeCache
from pipeline.dns.policy import TtlPolicy
from pipeline.dns.resolver import AresResolver
from pipeline.dns.wire import (
    Query,
    answer_reply,
    error_reply,
    notimp_reply,
    parse_query,
    reply_bytes,
    stats_reply,
)
from pipeline.settings import DnsSettings

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class ServerCounters:
    """What the server did, since it started. ``answered`` counts replies sent (any rcode)."""

    udp_queries: int = 0
    tcp_queries: int = 0
    answered: int = 0
    truncated: int = 0
    dropped_junk: int = 0
    dropped_busy: int = 0
    notimp: int = 0
    nxdomain: int = 0
    nodata: int = 0
    servfail: int = 0


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The server's own knobs; the cache's TTL clamps and negative cache come from :class:`DnsSettings`."""

    upstream: str = "127.0.0.1:5335"
    cache_size: int = 1_000_000
    upstream_timeout_s: float = 0.5
    upstream_tries: int = 3
    max_pending: int = 4096


def build_dqcache(settings: DnsSettings, config: ServerConfig) -> CachingResolver:
    """The dqcache over c-ares to ``config.upstream``: S2's TTL semantics, no S4 refresh, nothing transient kept."""
    upstream = AresResolver(
        (config.upstream,),
        timeout_s=config.upstream_timeout_s,
        tries=config.upstream_tries,
        max_inflight=config.max_pending,
    )
    negative = None
    if settings.negative_ttl_s > 0 and settings.negative_capacity > 0:
        negative = NegativeCache(
            capacity=settings.negative_capacity, fp_rate=settings.negative_fp_rate, ttl_s=settings.negative_ttl_s,
            clock=time.monotonic,
        )  # fmt: skip
    policy = TtlPolicy(settings.min_ttl_s, settings.max_ttl_s, refresh_period_s=0)
    # transient_ttl_s=0: a failure of the layer above is the nodes' to retry, never a cached fact here.
    return CachingResolver(
        upstream, policy=policy, cache_size=config.cache_size, negative=negative, transient_ttl_s=0.0
    )


class DqServer:
    """Answer DNS queries from a :class:`CachingResolver` over UDP and TCP. One event loop owns it."""

    def __init__(self, cache: CachingResolver, *, max_pending: int = 4096) -> None:
        self._cache = cache
        self._max_pending = max_pending
        self._pending: set[asyncio.Task[None]] = set()
        self._closers: list[object] = []
        self.counters = ServerCounters()

    # -- the pure-ish middle: one query in, one reply out ----------------------------------------
    def stats(self) -> dict[str, int]:
        """Server counters plus the dqcache's (``cache_hits``, ``upstream_queries``, ...)."""
        out = dataclasses.asdict(self.counters)
        snap = self._cache.stats()
        out.update(
            cache_hits=snap.hits, cache_misses=snap.misses, negative_hits=snap.negative_hits,
            inflight_joins=snap.inflight_joins, evictions=snap.evictions, upstream_queries=snap.queries_sent,
            upstream_errors=snap.errors, pending=len(self._pending),
        )  # fmt: skip
        negative = self._cache.negative_cache
        out["negative_clears"] = negative.clears if negative else 0
        out["negative_flood_clears"] = negative.flood_clears if negative else 0
        return out

    async def answer(self, data: bytes, *, tcp: bool) -> bytes | None:
        """The reply to one query's bytes, or None when it must be dropped. Never raises."""
        query = parse_query(data)
        if query is None:
            self.counters.dropped_junk += 1
            return None
        try:
            reply = await self._reply(query)
        except Exception:  # a bug must cost one query, never the server
            _log.exception("answering %s failed", query.name)
            reply = error_reply(query, "servfail")
            self.counters.servfail += 1
        out, truncated = reply_bytes(reply, udp_limit=None if tcp else query.udp_limit)
        self.counters.truncated += truncated
        self.counters.answered += 1
        return out

    async def _reply(self, query: Query) -> DNSRecord:
        if query.is_stats:
            return stats_reply(query, self.stats())
        family = query.family
        if family is None or not query.name:
            self.counters.notimp += 1
            return notimp_reply(query)
        try:
            addresses = await self._cache.resolve(query.name, family=family)
        except DnsError as exc:
            kind = exc.kind
            if kind == "nxdomain":
                self.counters.nxdomain += 1
            elif kind == "no_address":
                self.counters.nodata += 1
            else:
                self.counters.servfail += 1
            return error_reply(query, kind)
        cached = self._cache.cached(query.name, family=family)
        ttl = int(cached[2] - cached[1]) if cached is not None else 0
        return answer_reply(query, addresses, max(ttl, 1))

    # -- the network edge ------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> int:
        """Serve UDP and TCP on ``host:port`` (0 = a port free for both); returns the port."""
        loop = asyncio.get_running_loop()
        for _ in range(20 if port == 0 else 1):
            transport, _proto = await loop.create_datagram_endpoint(
                lambda: _Udp(self), local_addr=(host, port)
            )
            chosen = int(transport.get_extra_info("sockname")[1])
            with contextlib.suppress(OSError):  # bursts from many nodes: queue rather than drop
                transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            try:
                tcp = await asyncio.start_server(self._tcp_client, host, chosen, reuse_address=True)
            except OSError:
                transport.close()
                if port != 0:
                    raise
                continue
            self._closers = [transport, tcp]
            return chosen
        raise OSError("no port free for both UDP and TCP")

    def submit(self, data: bytes, send: Callable[[bytes], None]) -> None:
        """Answer a datagram in a task of its own; drop it when ``max_pending`` are in progress."""
        self.counters.udp_queries += 1
        if len(self._pending) >= self._max_pending:
            self.counters.dropped_busy += 1
            return
        task = asyncio.ensure_future(self._answer_udp(data, send))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _answer_udp(self, data: bytes, send: Callable[[bytes], None]) -> None:
        out = await self.answer(data, tcp=False)
        if out is not None:
            send(out)

    async def _tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readexactly(2)
                data = await reader.readexactly(struct.unpack("!H", head)[0])
                self.counters.tcp_queries += 1
                out = await self.answer(data, tcp=True)
                if out is None:
                    break  # junk on a stream: the framing can no longer be trusted
                writer.write(struct.pack("!H", len(out)) + out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def aclose(self) -> None:
        for closer in self._closers:
            closer.close()  # type: ignore[attr-defined]
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*self._pending, return_exceptions=True)
        await self._cache.aclose()


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: DqServer) -> None:
        self._server = server
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        transport = self._transport
        if transport is None:
            return

        def send(out: bytes) -> None:
            if not transport.is_closing():
                transport.sendto(out, addr)

        self._server.submit(data, send)
