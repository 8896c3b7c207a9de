"""When DNS failing is the crawl's configuration, not the web: stop and say so, never burn the queue.

A name that does not resolve is a final failure for its URLs (``dns_nxdomain``), and a resolver that
keeps timing out fails them after a few retries. That is right for one dead host, and wrong when every
name fails: no resolver reachable, or a resolver that does not know the crawl's names (a resume
without the ``--dns-server`` the crawl started with). Recording those failures would turn the whole
pending set into permanent failures within seconds. Two checks tell the cases apart:

- ``judge``: before a crawl starts, a few of its hosts (the seeds' or, on resume, hosts with pending
  URLs) are resolved; when not one of them resolves to an address the crawl may use, the crawl does
  not start and the URLs stay pending.
- ``DnsBurst``: while a crawl runs, results are watched; when in a short window many results across
  several hosts all failed DNS and nothing else came back, the crawl should stop and say why.

Pure: decisions are functions of the observations, the thresholds and an injected clock.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: Result error classes that are DNS failures (fetchers/exchange.py: ``dns_<kind>``).
DNS_CLASSES = frozenset({"dns_nxdomain", "dns_timeout", "dns_servfail", "dns_refused", "dns_malformed"})
GUARD = "guard"  # a probe's error: every address is one the SSRF guard refuses


@dataclass(frozen=True, slots=True)
class Probe:
    """One host resolved before the crawl: ``error`` is '' when it resolved to a usable address, else a
    DNS error kind (nxdomain, timeout, ...) or ``GUARD``; ``detail`` says more (the refused address)."""

    host: str
    error: str = ""
    detail: str = ""


def judge(probes: Sequence[Probe], *, resolver: str, shown: int = 3) -> str | None:
    """None when nothing was probed or one host resolved to a usable address; else one line saying
    why the configuration looks wrong (``resolver`` names the DNS servers used)."""
    if not probes or any(not p.error for p in probes):
        return None
    examples = ", ".join(f"{p.host} ({p.detail or p.error})" for p in probes[:shown])
    more = f" and {len(probes) - shown} more" if len(probes) > shown else ""
    if all(p.error == GUARD for p in probes):
        return (
            f"every host tried resolves only to addresses the SSRF guard refuses: {examples}{more}; "
            "expected public addresses, or --allow-network CIDR for a network you mean to crawl"
        )
    return (
        f"DNS failed for every host tried with {resolver}: {examples}{more}; "
        "expected a resolver that knows these names (check --dns-server)"
    )


@dataclass(slots=True)
class DnsBurst:
    """Trips when, within ``window_s``, at least ``min_results`` results across at least ``min_hosts``
    hosts failed DNS and no other result (a page, or any other error) came back since the oldest of them."""

    clock: Callable[[], float]
    window_s: float = 10.0
    min_results: int = 32
    min_hosts: int = 3
    _failures: collections.deque[tuple[float, str]] = field(default_factory=collections.deque)
    _last_other: float = float("-inf")

    def observe(self, host: str, error_class: str) -> None:
        now = self.clock()
        if error_class in DNS_CLASSES:
            self._failures.append((now, host))
        else:
            self._last_other = now
            self._failures.clear()
        self._expire(now)

    def _expire(self, now: float) -> None:
        while self._failures and self._failures[0][0] < now - self.window_s:
            self._failures.popleft()

    def tripped(self) -> bool:
        self._expire(self.clock())
        if len(self._failures) < self.min_results or self._last_other >= self._failures[0][0]:
            return False
        return len({host for _, host in self._failures}) >= self.min_hosts

    def hosts(self) -> list[str]:
        """The hosts of the failures in the window, in order of first failure."""
        return list(dict.fromkeys(host for _, host in self._failures))
