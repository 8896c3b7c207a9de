"""Counters of the DNS layer, exported into the crawl's stats as a flat dict."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(slots=True)
class DnsStats:
    """Cumulative counters since the resolver was built.

    hits: answered from the positive cache (fresh or stale); misses: had to ask upstream;
    negative_hits: answered from the negative cache; inflight_joins: waited on a query another
    caller had already sent; evictions: entries pushed out by CLOCK; refreshes: background
    refreshes started (S4); queries_sent: queries the upstream sent; errors: failed resolutions
    (not counting negative hits); stale_served: hits that got a stale value while refreshing.
    """

    hits: int = 0
    misses: int = 0
    negative_hits: int = 0
    inflight_joins: int = 0
    evictions: int = 0
    refreshes: int = 0
    queries_sent: int = 0
    errors: int = 0
    stale_served: int = 0

    def as_dict(self, prefix: str = "dns_") -> dict[str, int]:
        return {f"{prefix}{k}": v for k, v in dataclasses.asdict(self).items()}
