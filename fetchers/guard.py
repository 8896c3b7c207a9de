"""SSRF guard: which peer addresses a crawler may connect to.

``is_forbidden_ip`` is pure. ``GuardedResolver`` wraps any aiohttp resolver and drops forbidden
answers *inside the connector*, so the address that was checked is the address that is connected to
(no DNS-rebinding window between a check and a second lookup). aiohttp bypasses the resolver for
IP-literal hosts, so callers must check those with ``is_forbidden_ip`` themselves (the fetch engine does,
for every hop).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Instance-metadata endpoints: link-local on AWS/GCP/Azure/OpenStack (caught as link-local too, but named
# here so the reason is explicit), AWS's IPv6 one, Alibaba's CGNAT one, Azure's wire server (a public IP).
_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16", "169.254.170.2")
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class SsrfBlocked(OSError):
    """Every address a name resolved to (or the literal address) is forbidden. An OSError so that aiohttp's
    connector wraps it as a connection error instead of crashing; ``reason`` says why."""

    def __init__(self, host: str, ip: str, reason: str) -> None:
        super().__init__(f"ssrf guard refused {host} -> {ip}: {reason}")
        self.host = host
        self.ip = ip
        self.reason = reason


def parse_networks(cidrs: Iterable[str | IPNetwork]) -> tuple[IPNetwork, ...]:
    """CIDR strings (or networks) to networks; a bare address is a /32 or /128."""
    return tuple(c if not isinstance(c, str) else ipaddress.ip_network(c.strip(), strict=False) for c in cidrs)


def _embedded_v4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, 6to4, NAT64), else None."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def is_forbidden_ip(ip: str | IPAddress, allow_networks: Iterable[str | IPNetwork] = ()) -> str:
    """Why a crawler must not connect to ``ip``, or '' when it may.

    Refused: unparseable, cloud metadata, loopback, private, link-local, multicast, reserved,
    unspecified, CGNAT (100.64/10), and anything else not globally routable. IPv6 forms that embed
    an IPv4 address (mapped ``::ffff:a.b.c.d``, 6to4, NAT64) are judged by that IPv4 address.
    An address inside one of ``allow_networks`` is always allowed (e.g. 127.0.10.0/24 for the testbed).
    """
    try:
        addr: IPAddress = ip if not isinstance(ip, str) else ipaddress.ip_address(ip.strip("[]"))
    except ValueError:
        return "invalid_ip"
    nets = parse_networks(allow_networks) if allow_networks else ()
    candidates: list[IPAddress] = [addr]
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.scope_id:
            addr = ipaddress.IPv6Address(str(addr).split("%", 1)[0])
            candidates = [addr]
        inner = _embedded_v4(addr)
        if inner is not None:  # judged by the IPv4 address it carries (the wrapper ranges are "private")
            candidates = [inner]
    if nets and any(c.version == n.version and c in n for c in (addr, *candidates) for n in nets):
        return ""
    for c in candidates:
        reason = _reason(c)
        if reason:
            return reason
    return ""


def _reason(addr: IPAddress) -> str:
    if addr in _METADATA:
        return "cloud_metadata"
    if addr.is_unspecified:
        return "unspecified"
    if addr.is_loopback:
        return "loopback"
    if addr.is_link_local:
        return "link_local"
    if addr.is_multicast:
        return "multicast"
    if isinstance(addr, ipaddress.IPv4Address) and addr in _CGNAT:
        return "cgnat"
    if addr.is_reserved:
        return "reserved"
    if addr.is_private:
        return "private"
    if not addr.is_global:
        return "non_global"
    return ""


class GuardedResolver(AbstractResolver):
    """Resolve through ``inner`` and keep only permitted addresses; raise ``SsrfBlocked`` when none is left.

    Used as the TCPConnector's resolver, so the connector only ever connects to checked addresses.
    Decisions are memoised per address string (the allow-list is fixed for the resolver's life).
    """

    def __init__(self, inner: AbstractResolver, allow_networks: Iterable[str | IPNetwork] = ()) -> None:
        self.inner = inner
        self.allow_networks = parse_networks(allow_networks)
        self._decisions: dict[str, str] = {}

    def check(self, ip: str) -> str:
        """``is_forbidden_ip`` against this resolver's allow-list, memoised."""
        reason = self._decisions.get(ip)
        if reason is None:
            reason = is_forbidden_ip(ip, self.allow_networks)
            if len(self._decisions) > 65536:
                self._decisions.clear()
            self._decisions[ip] = reason
        return reason

    async def resolve(self, host: str, port: int = 0, family: Any = 0) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        kept = [r for r in results if not self.check(r["host"])]
        if not kept:
            ip = results[0]["host"] if results else ""
            raise SsrfBlocked(host, ip, self.check(ip) if ip else "no_address")
        return kept

    async def close(self) -> None:
        await self.inner.close()
