"""aiohttp adapter: our :class:`CachingResolver` as an ``aiohttp.abc.AbstractResolver``.

aiohttp's own cache ignores real TTLs and lives per connector; this adapter replaces it (build the
connector with ``use_dns_cache=False``). It is a plain resolver: address filtering (the SSRF guard)
wraps it from outside. Failures are raised as :class:`DnsLookupError`, an ``OSError`` as aiohttp
expects (the connector turns it into ``ClientConnectorDNSError``) that still carries our ``kind``.
"""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult

from pipeline.dns.cache_resolver import CachingResolver, ip_literal
from pipeline.dns.errors import DnsError

_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


class DnsLookupError(OSError):
    """A failed look-up as aiohttp wants it; ``kind``/``cached`` come from the :class:`DnsError`."""

    def __init__(self, error: DnsError) -> None:
        super().__init__(None, str(error))
        self.kind = error.kind
        self.cached = error.cached


def _family_of(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


class AiohttpResolver(AbstractResolver):
    """Resolve through a shared :class:`CachingResolver`; IP literals are returned directly.

    ``close()`` does not close the wrapped resolver, which usually outlives one connector.
    """

    def __init__(self, resolver: CachingResolver) -> None:
        self._resolver = resolver

    @property
    def resolver(self) -> CachingResolver:
        return self._resolver

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        literal = ip_literal(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = await self._resolver.resolve(host, family=int(family))
            except DnsError as exc:
                raise DnsLookupError(exc) from exc
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=_family_of(address),
                proto=0,
                flags=_FLAGS,
            )
            for address in addresses
        ]

    async def close(self) -> None:
        return None
