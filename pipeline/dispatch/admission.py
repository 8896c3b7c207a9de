"""S1 quota admission and node choice, on an injected clock.

Seconds: ``s = int(now) % 60 + 1`` (1..60) and the minute number is ``int(now) // 60``. Every service's
``n`` and every fetcher's ``r`` go back to 0 at second 1 of every minute -- implemented as "whenever the
minute number differs from the last one seen", which is the same instant when calls arrive every second
and still resets when a quiet spell skips second 1 (or whole minutes). It resets once per minute, not on
every call during second 1, which would let second 1 grant without limit.

Admission (S1 rule 2) with the shrink rule used when S3 wants more than S1 allows:

    budget = floor(s * m) - n            # unused seconds carry over, within the minute only
    t      = min(wanted, budget)         # wanted = n_i from S3; the batch shrinks to the budget
    refuse ("quota") when budget < 1

so ``t + n <= s*m`` always holds: a granted batch never breaks rule 2, and a refused one is one for which
even t = 1 would. Node choice (S1 rule 3): ``u = p*s + q - r`` for each live fetcher; a fetcher is a
candidate when ``u > t`` for *its own* t (its n_i shrunk to the budget); the candidate with the largest u
wins, ties to the smallest fetcher id. ``grant`` then adds the URLs actually leased to n and r.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.dispatch.quotas import Quotas


def second_of_minute(now: float) -> int:
    """s in 1..60."""
    return int(math.floor(now)) % 60 + 1


def minute_of(now: float) -> int:
    return int(math.floor(now)) // 60


def capacity(*, p: float, q: int, r: int, s: int) -> float:
    """S1's predicted free capacity u = p*s + q - r."""
    return p * s + q - r


@dataclass(slots=True)
class Candidate:
    """A live fetcher as node choice sees it: its S1 load figures and the batch S3 wants for it."""

    fetcher_id: str
    p: float
    q: int
    wanted: int  # n_i


@dataclass(slots=True)
class Choice:
    fetcher_id: str
    t: int  # the admitted batch size for that fetcher
    u: float


@dataclass(slots=True)
class Admission:
    """The per-minute counters n (per service) and r (per fetcher), and the two S1 decisions."""

    quotas: Quotas
    _minute: int | None = None
    _n: dict[str, int] = field(default_factory=dict)
    _r: dict[str, int] = field(default_factory=dict)

    def roll(self, now: float) -> bool:
        """Reset n and r if the minute changed; returns True when it reset."""
        minute = minute_of(now)
        if minute == self._minute:
            return False
        if self._minute is not None and minute < self._minute:
            # The clock went backwards (NTP step): keep counting in the later minute rather than
            # resetting, which could grant a second full minute's quota.
            return False
        self._minute = minute
        self._n.clear()
        self._r.clear()
        return True

    def budget(self, service: str, now: float) -> float | None:
        """floor(s*m) - n for ``service`` now; None if unknown; ``math.inf`` if unlimited."""
        self.roll(now)
        m = self.quotas.quota(service)
        if m is None:
            return None
        if math.isinf(m):
            return math.inf
        return math.floor(second_of_minute(now) * m + 1e-9) - self._n.get(service, 0)

    @staticmethod
    def admitted(wanted: int, budget: float) -> int:
        """The shrink rule: min(wanted, budget), 0 meaning refused."""
        if budget < 1 or wanted < 1:
            return 0
        return int(min(wanted, budget))

    def choose(self, candidates: Iterable[Candidate], budget: float, now: float) -> Choice | None:
        """S1 rule 3 over live fetchers: max u among those with u > t; None if there is no candidate."""
        self.roll(now)
        s = second_of_minute(now)
        best: Choice | None = None
        r = self._r
        for c in candidates:
            t = self.admitted(c.wanted, budget)
            if t < 1:
                continue
            u = c.p * s + c.q - r.get(c.fetcher_id, 0)
            if u > t and (
                best is None or u > best.u or (u == best.u and c.fetcher_id < best.fetcher_id)
            ):
                best = Choice(c.fetcher_id, t, u)
        return best

    def grant(self, service: str, fetcher_id: str, urls: int, now: float) -> None:
        """n += t, r += t for the URLs actually handed out."""
        self.roll(now)
        self._n[service] = self._n.get(service, 0) + urls
        self._r[fetcher_id] = self._r.get(fetcher_id, 0) + urls

    def wait_s(self, service: str, now: float) -> float:
        """Seconds until floor(s*m) - n >= 1 (a batch of one fits), or until the next minute if later."""
        m = self.quotas.quota(service) or 0.0
        start = minute_of(now) * 60.0
        need = (self.n(service) + 1) / m if m > 0 else math.inf  # the second s at which it fits
        if need > 60:
            return max(0.0, start + 60 - now)
        return max(0.0, start + math.ceil(need) - 1 - now)

    def n(self, service: str) -> int:
        return self._n.get(service, 0)

    def r(self, fetcher_id: str) -> int:
        return self._r.get(fetcher_id, 0)
