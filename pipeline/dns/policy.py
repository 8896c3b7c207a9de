"""TTL policy as pure functions: S1/S2 clamping and S4's refresh rule. No clock is read here.

Clamping (S1 lengthens short TTLs and shortens very long ones; S2 raises TTLs below a threshold):
``clamp(ttl) = min(max(ttl, min_ttl), max_ttl)``; a missing TTL (getaddrinfo) counts as ``min_ttl``.
The clamped TTL is stored in whole minutes as S2 does, rounded up so that it is never shorter than
the clamp asked for, and capped at 65,535 minutes.

Freshness of an entry of age ``a`` with stored TTL ``t`` (seconds) and refresh period ``P``:

* ``P > 0`` (S4): ``a < P`` is FRESH whatever the TTL; ``P <= a < P + t`` is STALE: the next hit is
  served the stale value once while a refresh runs in the background; ``a >= P + t`` is EXPIRED:
  a miss, resolved in the foreground, so a name nobody asked for in a long while is never served
  from data older than its own (clamped) lifetime past the period.
* ``P == 0`` (plain TTL): ``a < t`` is FRESH, otherwise EXPIRED.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

_MAX_TTL_MIN = 0xFFFF


class Freshness(enum.Enum):
    FRESH = "fresh"
    STALE = "stale"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class TtlPolicy:
    min_ttl_s: int = 300
    max_ttl_s: int = 86400
    refresh_period_s: int = 1800

    def __post_init__(self) -> None:
        if self.min_ttl_s < 0 or self.max_ttl_s < self.min_ttl_s or self.refresh_period_s < 0:
            raise ValueError("need 0 <= min_ttl_s <= max_ttl_s and refresh_period_s >= 0")

    def clamp(self, ttl_s: int | None) -> int:
        """The TTL to honour, in seconds."""
        if ttl_s is None:
            return self.min_ttl_s
        return min(max(ttl_s, self.min_ttl_s), self.max_ttl_s)

    def ttl_minutes(self, ttl_s: int | None) -> int:
        """The clamped TTL as S2 stores it: whole minutes, rounded up, at least 1, uint16."""
        return min(max(math.ceil(self.clamp(ttl_s) / 60), 1), _MAX_TTL_MIN)

    def freshness(self, age_s: float, ttl_min: int) -> Freshness:
        """Classify an entry of ``age_s`` seconds whose stored TTL is ``ttl_min`` minutes."""
        ttl_s = ttl_min * 60
        period = self.refresh_period_s
        if period > 0:
            if age_s < period:
                return Freshness.FRESH
            return Freshness.STALE if age_s < period + ttl_s else Freshness.EXPIRED
        return Freshness.FRESH if age_s < ttl_s else Freshness.EXPIRED
