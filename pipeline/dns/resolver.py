"""Asynchronous name resolution on c-ares (aiodns over pycares): the network edge of the DNS layer.

:class:`AresResolver` sends one A or AAAA query per call and returns the addresses with the
smallest TTL of the answer; it keeps no cache of its own. Its contract, shared with the blocking
resolvers in :mod:`pipeline.dns.blocking`:

* ``async query(host, family) -> Answer``; failures raise :class:`DnsError` with a kind from
  :data:`pipeline.dns.errors.KINDS`;
* ``queries_sent``: how many queries it handed to the network (retries inside c-ares not counted);
* ``async aclose()``.

Details that matter:

* nameservers are ``HOST:PORT`` strings (``[v6]:PORT`` for IPv6); empty means resolv.conf;
* c-ares' own query cache (on by default since 1.23) is switched off: it would answer repeats
  without asking the server, hiding TTL refreshes and falsifying "no cache" measurements. pycares
  does not expose that option, so the channel is re-created from its saved options with
  ``ARES_OPT_QUERY_CACHE`` and ``qcache_max_ttl = 0``;
* the channel is created lazily on the running loop and re-created if a different loop calls,
  so one resolver works inside a long-lived per-process loop (a Celery worker's) and in tests;
* at most ``max_inflight`` queries are outstanding; c-ares retries ``tries`` times per server.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from typing import Any

import aiodns
import pycares
from pycares import _cares  # type: ignore[attr-defined]

from pipeline.dns.errors import Answer, DnsError

_log = logging.getLogger(__name__)

_ARES_OPT_UDP_MAX_QUERIES = 1 << 19
_ARES_OPT_QUERY_CACHE = 1 << 21  # ares.h; pycares 5 does not export it

_KIND_BY_CODE: dict[int, str] = {
    pycares.errno.ARES_ENOTFOUND: "nxdomain",
    pycares.errno.ARES_ENONAME: "nxdomain",
    pycares.errno.ARES_ENODATA: "no_address",
    pycares.errno.ARES_ESERVFAIL: "servfail",
    pycares.errno.ARES_ETIMEOUT: "timeout",
    pycares.errno.ARES_ECANCELLED: "timeout",
    pycares.errno.ARES_EDESTRUCTION: "timeout",
    pycares.errno.ARES_EREFUSED: "refused",
    pycares.errno.ARES_ECONNREFUSED: "refused",
    pycares.errno.ARES_ENOTIMP: "refused",
    pycares.errno.ARES_EFORMERR: "malformed",
    pycares.errno.ARES_EBADRESP: "malformed",
    pycares.errno.ARES_EBADNAME: "malformed",
    pycares.errno.ARES_EBADQUERY: "malformed",
}


def kind_of(code: int) -> str:
    """Our error kind for a c-ares status code (unknown codes count as malformed answers)."""
    return _KIND_BY_CODE.get(code, "malformed")


def parse_server(spec: str) -> str:
    """Validate ``HOST[:PORT]`` / ``[V6][:PORT]`` and return it in c-ares' CSV form."""
    spec = spec.strip()
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        socket.inet_pton(socket.AF_INET6, host)
        return f"[{host}]:{int(port)}" if port else f"[{host}]"
    if spec.count(":") > 1:  # bare IPv6 address, default port
        socket.inet_pton(socket.AF_INET6, spec)
        return f"[{spec}]"
    host, _, port = spec.partition(":")
    socket.inet_pton(socket.AF_INET, host)
    if port and not 0 < int(port) < 65536:
        raise ValueError(f"bad port in {spec!r}")
    return f"{host}:{int(port)}" if port else host


def _owner(name: str) -> str:
    return name.rstrip(".").lower()


def addresses_of(records: Sequence[Any], host: str, rtype: int) -> tuple[tuple[str, ...], int | None]:
    """The addresses of type ``rtype`` that belong to ``host`` in an answer section, and their smallest TTL.

    Only records owned by ``host`` or by a name its CNAME chain (in the same answer) leads to count:
    an address record for any other name is what a spoofed or buggy server adds to poison a cache,
    so it is ignored, never returned (RFC 2181 section 5.4.1's ranking keeps such data out).
    """
    owners = {_owner(host)}
    cnames = [r for r in records if r.type == pycares.QUERY_TYPE_CNAME]
    for _ in range(len(cnames)):  # a chain is at most as long as the CNAMEs present; loops end here
        grown = {_owner(r.data.cname) for r in cnames if _owner(r.name) in owners} - owners
        if not grown:
            break
        owners |= grown
    addresses: list[str] = []
    ttl: int | None = None
    for record in records:
        if _owner(record.name) not in owners:
            continue
        if record.type == rtype:
            addresses.append(record.data.addr)
        if record.type in (rtype, pycares.QUERY_TYPE_CNAME):
            ttl = record.ttl if ttl is None else min(ttl, record.ttl)
    return tuple(dict.fromkeys(addresses)), ttl


class _NoQcacheChannel(pycares.Channel):
    """A pycares channel whose c-ares query cache is disabled (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        servers = kwargs.pop("servers", None)
        super().__init__(**kwargs)
        ffi, lib = _cares.ffi, _cares.lib
        options = ffi.new("struct ares_options *")
        optmask = ffi.new("int *")
        new = ffi.new("ares_channel *")
        with self._capture_channel() as channel:
            if lib.ares_save_options(channel, options, optmask) != lib.ARES_SUCCESS:
                raise pycares.AresError("ares_save_options failed")
            options.qcache_max_ttl = 0
            # One query per UDP socket: c-ares ends every query sharing a socket when one reply on it is
            # garbage, so one hostile name's answer would fail unrelated look-ups in flight.
            options.udp_max_queries = 1
            status = lib.ares_init_options(
                new, options, optmask[0] | _ARES_OPT_QUERY_CACHE | _ARES_OPT_UDP_MAX_QUERIES
            )
            lib.ares_destroy_options(options)
            if status != lib.ARES_SUCCESS:
                raise pycares.AresError(status, pycares.errno.strerror(status))
            old, self._channel = self._channel, new
        if old is not None:
            lib.ares_destroy(old[0])  # no query was ever sent on it
        if servers:
            self.servers = servers


class _Resolver(aiodns.DNSResolver):
    """aiodns with the query-cache-free channel."""

    def _make_channel(self, **kwargs: Any) -> tuple[bool, pycares.Channel]:
        try:
            return True, _NoQcacheChannel(timeout=self._timeout, **kwargs)
        except (pycares.AresError, AttributeError, TypeError) as exc:  # an unforeseen pycares change
            _log.warning("cannot disable the c-ares query cache (%s); repeats may not reach the server", exc)
            return super()._make_channel(**kwargs)


class AresResolver:
    """One DNS query per call over c-ares; no caching (that is :class:`CachingResolver`'s job)."""

    def __init__(
        self,
        servers: Sequence[str] = (),
        *,
        timeout_s: float = 2.0,
        tries: int = 3,
        max_inflight: int = 256,
    ) -> None:
        self._servers = [parse_server(s) for s in servers]
        self._timeout_s = timeout_s
        self._tries = max(1, tries)
        self._max_inflight = max(1, max_inflight)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._resolver: _Resolver | None = None
        self._sem: asyncio.Semaphore | None = None
        # c-ares backs off between tries; this outer guard only catches a lost callback.
        self._guard_s = timeout_s * (2**self._tries) + 1.0
        self.queries_sent = 0

    def _bind(self) -> tuple[_Resolver, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._resolver is None or self._sem is None:
            if self._resolver is not None:
                self._resolver._channel.close()
            kwargs: dict[str, Any] = {"timeout": self._timeout_s, "tries": self._tries}
            if self._servers:
                kwargs["servers"] = self._servers
            self._resolver = _Resolver(loop=loop, **kwargs)
            self._sem = asyncio.Semaphore(self._max_inflight)
            self._loop = loop
        return self._resolver, self._sem

    async def query(self, host: str, family: int = socket.AF_INET) -> Answer:
        """Addresses of ``family`` (AF_INET or AF_INET6) for ``host``; raises DnsError."""
        qtype = "AAAA" if family == socket.AF_INET6 else "A"
        rtype = pycares.QUERY_TYPE_AAAA if family == socket.AF_INET6 else pycares.QUERY_TYPE_A
        resolver, sem = self._bind()
        async with sem:
            self.queries_sent += 1
            try:
                result = await asyncio.wait_for(resolver.query_dns(host, qtype), self._guard_s)
            except aiodns.error.DNSError as exc:
                code = exc.args[0] if exc.args else pycares.errno.ARES_EBADRESP
                raise DnsError(
                    kind_of(code), str(exc.args[1]) if len(exc.args) > 1 else "", host=host
                ) from exc
            except TimeoutError as exc:
                raise DnsError("timeout", "no callback from c-ares", host=host) from exc
            except (UnicodeError, ValueError) as exc:  # a name c-ares refuses to encode
                raise DnsError("malformed", str(exc), host=host) from exc
        addresses, ttl = addresses_of(result.answer, host, rtype)
        if not addresses:
            raise DnsError("no_address", f"no {qtype} record for the name in the answer", host=host)
        return Answer(addresses, ttl)

    async def aclose(self) -> None:
        if self._resolver is not None:
            self._resolver._channel.close()
            self._resolver = None
            self._loop = None
