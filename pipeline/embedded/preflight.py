"""Before a crawl starts: resolve a few of its hosts, so a DNS or address-guard setting that cannot work
stops the crawl with one line instead of failing every pending URL (``pipeline.crawl.dnsguard``).

The probe asks the crawl's own DNS settings (one try each, at most ``PROBE_HOSTS`` hosts at once) and
judges the answers by the crawl's SSRF guard settings: the same resolver and guard the fetcher uses.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from fetchers.guard import is_forbidden_ip
from pipeline.crawl.dnsguard import GUARD, Probe, judge
from pipeline.dns.cache_resolver import CachingResolver
from pipeline.dns.errors import DnsError
from pipeline.settings import Settings

PROBE_HOSTS = 8
TIMEOUT_WAIT_S = 30.0  # how long a resolver that answers nothing may take to come back before the crawl starts
RETRY_S = 2.0

log = logging.getLogger(__name__)


async def _probe_one(resolver: CachingResolver, host: str, allow: tuple[str, ...]) -> Probe:
    addresses: list[str] = []
    for family in (socket.AF_INET, socket.AF_INET6):  # a host with AAAA records only is fine too
        try:
            addresses = await resolver.resolve(host, family=family)
            break
        except DnsError as exc:
            if exc.kind != "no_address" or family == socket.AF_INET6:
                return Probe(host, exc.kind)
    refused = [(ip, why) for ip in addresses if (why := is_forbidden_ip(ip, allow))]
    if addresses and len(refused) == len(addresses):
        return Probe(host, GUARD, f"{refused[0][0]}: {refused[0][1]}")
    return Probe(host)


async def probe(settings: Settings, hosts: Iterable[str]) -> list[Probe]:
    """Resolve the first ``PROBE_HOSTS`` of ``hosts`` with the crawl's DNS settings, one try each."""
    names = (urlsplit(f"//{h}").hostname for h in hosts if h)  # a crawl's host keys may carry a port
    chosen = list(dict.fromkeys(n for n in names if n))[:PROBE_HOSTS]
    if not chosen:
        return []
    resolver = CachingResolver.from_settings(dataclasses.replace(settings.dns, tries=1))
    try:
        allow = settings.security.allow_networks
        return list(await asyncio.gather(*(_probe_one(resolver, h, allow) for h in chosen)))
    finally:
        await resolver.aclose()


def check(
    settings: Settings,
    hosts: Iterable[str],
    *,
    wait_s: float = TIMEOUT_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """None when the crawl can reach at least one of ``hosts``; else one line saying what to fix.

    A resolver that answers nothing at all (every probe timed out) may be restarting: the probe is
    tried again for up to ``wait_s`` before the crawl is refused. A wrong answer (nxdomain, refused,
    an address the guard forbids) is a setting to fix, and refused at once."""
    servers = settings.dns.servers
    resolver = f"DNS server{'s' if len(servers) > 1 else ''} {', '.join(servers)}" if servers else "the system resolver"
    chosen = list(hosts)
    deadline = clock() + wait_s
    warned = False
    while True:
        probes = asyncio.run(probe(settings, chosen))
        problem = judge(probes, resolver=resolver)
        silent = bool(probes) and all(p.error == "timeout" for p in probes)
        if problem is None or not silent or clock() >= deadline:
            return problem
        if not warned:
            log.warning("DNS: %s answers nothing yet; trying again for up to %.0fs before giving up", resolver, wait_s)
            warned = True
        sleep(RETRY_S)
