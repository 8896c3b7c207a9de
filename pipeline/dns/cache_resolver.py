"""The crawler's resolver: S2 positive + negative caches and S4's refresh rule over an upstream.

``resolve(host, family=AF_INET)`` answers, in order:

1. IP literals: returned as they are;
2. the positive cache (one per family, :class:`PositiveCache`), judged by :class:`TtlPolicy`:
   FRESH is served; STALE is served once while one background refresh runs, and hits that arrive
   during that refresh wait for it (they get the stale value back if it fails); EXPIRED is a miss;
3. the negative cache (:class:`NegativeCache`): a recent failure is raised again without a query;
4. the upstream (:class:`AresResolver` or a blocking one), with in-flight de-duplication: every
   concurrent caller for one (name, family) awaits the same single query.

``AF_UNSPEC`` asks for A records and falls back to AAAA when the name has no A record.
A cancelled caller never cancels the shared query. The clock is injected and read only here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import time
from collections.abc import Callable
from typing import Protocol

from pipeline.dns.errors import Answer, DnsError
from pipeline.dns.keys import name_key, normalize_name, prefix_range
from pipeline.dns.negative import NegativeCache
from pipeline.dns.policy import Freshness, TtlPolicy
from pipeline.dns.positive import PositiveCache
from pipeline.dns.stats import DnsStats
from pipeline.settings import DnsSettings

_V6 = socket.AF_INET6


class Upstream(Protocol):
    """What :class:`CachingResolver` needs from the network edge."""

    queries_sent: int

    async def query(self, host: str, family: int = socket.AF_INET) -> Answer: ...

    async def aclose(self) -> None: ...


def ip_literal(host: str) -> str | None:
    """``host`` as a canonical IP address string if it is one (brackets allowed for IPv6), else None."""
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_ntop(family, socket.inet_pton(family, text))
        except (OSError, ValueError):
            continue
    return None


def _encode(address: str, family: int) -> int:
    return int.from_bytes(socket.inet_pton(family, address), "big")


def _decode(value: int, family: int) -> str:
    return socket.inet_ntop(family, value.to_bytes(16 if family == _V6 else 4, "big"))


# A malformed reply is the server's fault of the moment (or a spoofer's), not a fact about the name:
# remembering it in the Bloom filter would let one garbage datagram fail a good name for a whole TTL.
TRANSIENT_KINDS = frozenset({"timeout", "servfail", "refused", "malformed"})
TRANSIENT_TTL_S = 5.0


class CachingResolver:
    """Caching, de-duplicating resolver. Build with :meth:`from_settings` in production code.

    One event loop at a time owns it (a worker process's long-lived loop); a later loop may take
    over (caches are kept, in-flight state starts afresh), but two loops must not use it at once.
    The IPv4 cache holds ``cache_size`` names, the IPv6 cache a quarter of that.
    """

    def __init__(
        self,
        upstream: Upstream,
        *,
        policy: TtlPolicy,
        cache_size: int,
        negative: NegativeCache | None,
        clock: Callable[[], float] = time.monotonic,
        transient_ttl_s: float = TRANSIENT_TTL_S,
    ) -> None:
        self._upstream = upstream
        self._transient_ttl_s = transient_ttl_s
        self._policy = policy
        self._clock = clock
        self._epoch = clock()
        self._v4 = PositiveCache(cache_size)
        self._v6 = PositiveCache(max(1, cache_size // 4), ipv6=True)
        self._negative = negative
        # Transient failures (timeout, SERVFAIL, REFUSED) stay out of the Bloom filter: a Bloom entry
        # cannot be removed, so an upstream outage would fail every name for a whole negative TTL and
        # the crawl would record those URLs as failed for good. They are remembered briefly instead.
        self._transient: dict[tuple[str, int], tuple[str, float]] = {}
        self._inflight: dict[tuple[str, int], asyncio.Future[list[str]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._stats = DnsStats()

    @classmethod
    def from_settings(
        cls,
        settings: DnsSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        upstream: Upstream | None = None,
    ) -> CachingResolver:
        """The standard stack: c-ares upstream on ``settings.servers`` (resolv.conf if empty)."""
        from pipeline.dns.resolver import AresResolver

        if upstream is None:
            upstream = AresResolver(
                settings.servers,
                timeout_s=settings.timeout_s,
                tries=settings.tries,
                max_inflight=settings.max_inflight,
            )
        policy = TtlPolicy(settings.min_ttl_s, settings.max_ttl_s, settings.refresh_period_s)
        negative = None
        if settings.negative_ttl_s > 0 and settings.negative_capacity > 0:
            negative = NegativeCache(
                capacity=settings.negative_capacity,
                fp_rate=settings.negative_fp_rate,
                ttl_s=settings.negative_ttl_s,
                clock=clock,
            )
        return cls(upstream, policy=policy, cache_size=settings.cache_size, negative=negative, clock=clock)

    # -- public --------------------------------------------------------------------------------
    async def resolve(self, host: str, *, family: int = socket.AF_INET) -> list[str]:
        """IP address strings for ``host``; raises :class:`DnsError`."""
        literal = ip_literal(host)
        if literal is not None:
            return [literal]
        name = normalize_name(host)
        if not name:
            raise DnsError("malformed", "empty host name", host=host)
        if family == socket.AF_UNSPEC:
            try:
                return await self._resolve(name, socket.AF_INET)
            except DnsError as exc:
                if exc.kind != "no_address":
                    raise
                return await self._resolve(name, _V6)
        return await self._resolve(name, _V6 if family == _V6 else socket.AF_INET)

    def stats(self) -> DnsStats:
        """A snapshot of the counters."""
        snap = dataclasses.replace(self._stats)
        snap.evictions = self._v4.evictions + self._v6.evictions
        snap.queries_sent = self._upstream.queries_sent
        return snap

    @property
    def negative_cache(self) -> NegativeCache | None:
        """The Bloom negative cache (None when off), for its counters."""
        return self._negative

    def count_names(self, tld: str, sld: str | None = None, *, family: int = socket.AF_INET) -> int:
        """How many cached names lie under ``.tld`` (or ``sld.tld``): S2's prefix count."""
        lo, hi = prefix_range(tld, sld)
        return (self._v6 if family == _V6 else self._v4).count_range(lo, hi)

    def cached(self, host: str, *, family: int = socket.AF_INET) -> tuple[list[str], float, int] | None:
        """(addresses, age seconds, stored TTL seconds) of a cached entry, without touching it."""
        fam = _V6 if family == _V6 else socket.AF_INET
        entry = (self._v6 if fam == _V6 else self._v4).get(name_key(normalize_name(host)), touch=False)
        if entry is None:
            return None
        ips, born, ttl_min = entry
        return [_decode(v, fam) for v in ips], self._now() - born, ttl_min * 60

    async def drain(self) -> None:
        """Wait for background refreshes started so far (tests and orderly shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._background):
            task.cancel()
        await self.drain()
        await self._upstream.aclose()

    # -- internals -----------------------------------------------------------------------------
    def _now(self) -> float:
        return self._clock() - self._epoch

    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # futures belong to one loop; a new loop starts clean
            self._inflight = {}
            self._background = set()
            self._loop = loop

    async def _resolve(self, name: str, family: int) -> list[str]:
        self._bind_loop()
        cache = self._v6 if family == _V6 else self._v4
        key = name_key(name)
        entry = cache.get(key)
        if entry is not None:
            ips, born, ttl_min = entry
            state = self._policy.freshness(self._now() - born, ttl_min)
            if state is Freshness.FRESH:
                self._stats.hits += 1
                return [_decode(v, family) for v in ips]
            if state is Freshness.STALE:
                stale = [_decode(v, family) for v in ips]
                pending = self._inflight.get((name, family))
                if pending is None and self._recently_failed(name, family):
                    # A refresh failed recently: keep serving stale until the negative cache clears.
                    self._stats.hits += 1
                    self._stats.stale_served += 1
                    return stale
                if pending is None:  # serve stale once, refresh in the background
                    self._stats.hits += 1
                    self._stats.stale_served += 1
                    self._stats.refreshes += 1
                    self._start_background(self._start_lookup(name, family, key))
                    return stale
                self._stats.inflight_joins += 1
                try:
                    return list(await asyncio.shield(pending))
                except DnsError:
                    self._stats.hits += 1
                    return stale
            cache.delete(key)  # EXPIRED
        if self._negative is not None:
            kind = self._negative.get(name, family)
            if kind is not None:
                self._stats.negative_hits += 1
                raise DnsError(kind, "negative cache", host=name, cached=True)
        brief = self._transient.get((name, family))
        if brief is not None:
            if brief[1] > self._now():
                self._stats.negative_hits += 1
                raise DnsError(brief[0], "recent transient failure", host=name, cached=True)
            del self._transient[(name, family)]
        self._stats.misses += 1
        pending = self._inflight.get((name, family))
        if pending is not None:
            self._stats.inflight_joins += 1
        else:
            pending = self._start_lookup(name, family, key)
        return list(await asyncio.shield(pending))

    def _recently_failed(self, name: str, family: int) -> bool:
        brief = self._transient.get((name, family))
        if brief is not None and brief[1] > self._now():
            return True
        return self._negative is not None and self._negative.get(name, family) is not None

    def _start_lookup(self, name: str, family: int, key: int) -> asyncio.Future[list[str]]:
        task = asyncio.ensure_future(self._lookup(name, family, key))
        self._inflight[(name, family)] = task
        # Retrieve the exception even if every caller was cancelled, so asyncio does not log it.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    def _start_background(self, fut: asyncio.Future[list[str]]) -> None:
        async def wait() -> None:
            with contextlib.suppress(DnsError):
                await fut

        task = asyncio.ensure_future(wait())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _lookup(self, name: str, family: int, key: int) -> list[str]:
        try:
            answer = await self._upstream.query(name, family)
        except DnsError as exc:
            self._stats.errors += 1
            if not exc.cached and exc.kind in TRANSIENT_KINDS:
                if self._transient_ttl_s <= 0:
                    raise
                if len(self._transient) > 65_536:
                    self._transient.clear()
                self._transient[(name, family)] = (exc.kind, self._now() + self._transient_ttl_s)
            elif self._negative is not None and not exc.cached:
                self._negative.add(name, family, exc.kind)
            # A failed refresh keeps the stale entry: it expires by the policy, not by the failure.
            raise
        finally:
            self._inflight.pop((name, family), None)
        cache = self._v6 if family == _V6 else self._v4
        cache.put(
            key,
            [_encode(a, family) for a in answer.addresses],
            born_s=int(self._now()),
            ttl_min=self._policy.ttl_minutes(answer.ttl_s),
        )
        return list(answer.addresses)


def dns_counters(resolver: CachingResolver) -> dict[str, int]:
    """The resolver's cache counters as plain ints, the shape a fetch process reports to its parent."""
    snap = resolver.stats()
    names = ("hits", "misses", "negative_hits", "inflight_joins", "evictions", "refreshes")
    return {name: int(getattr(snap, name, 0)) for name in names}
