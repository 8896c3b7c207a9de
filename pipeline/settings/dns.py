"""The resolver tier: servers, timeouts and the S2/S4 caches.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DnsSettings:
    servers: tuple[str, ...] = ()  # "HOST:PORT"; empty = system resolver
    timeout_s: float = 2.0
    tries: int = 3
    min_ttl_s: int = 300
    max_ttl_s: int = 86400
    refresh_period_s: int = 1800  # S4
    negative_ttl_s: int = 300
    negative_fp_rate: float = 1e-6
    negative_capacity: int = 1_000_000
    cache_size: int = 50_000  # S4
    max_inflight: int = 256
