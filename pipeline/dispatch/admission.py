"""S1 quota admission, on an injected clock (and ``capacity``, the u of S1's node choice: nodechoice.py).

Seconds: ``s = int(now) % 60 + 1`` (1..60) and the minute number is ``int(now) // 60``. Every service's
``n`` and every fetcher's ``r`` go back to 0 at second 1 of every minute -- implemented as "whenever the
minute number differs from the last one seen", which is the same instant when calls arrive every second
and still resets when a quiet spell skips second 1 (or whole minutes). It resets once per minute, not on
every call during second 1, which would let second 1 grant without limit.

Admission is S1 rule 2 exactly (the default)::

    budget = floor(s * m) - n            # unused seconds carry over, within the minute only
    refuse ("quota") when t + n > s*m    # i.e. t > budget: the answer is no, t is never cut down

``t`` is what the client asks for. S1 leaves it to the client; ours asks for ``request(service, n_i)``:
S3's n_i, but never more than one second's quota (``max(1, ceil(m))``). A request larger than a whole
minute's quota would be refused for ever, and one of a second's worth is admissible in the second it is
made, which keeps the URLs handed out per second flat -- S1's claimed effect.

Pacing (``Quotas.pace``, from the quota file's ``[pace]``; off for ``Quotas`` built in code) is the client's
side, ours: a request is at most ``slice_s`` seconds' quota (``ceil(m*slice_s)``, at least 1) instead of one
second's, and the budget is also held to a token bucket (m tokens/s, at most ``max(slice, m*burst_s)``),
so grants follow a steady line through each second and a dip is not made up in a burst. The pace only
ever makes the budget smaller: every grant still satisfies S1's ``t + n <= s*m``.

``shrink=True`` (``dispatch.quota_shrink``, off by default) is a documented deviation from S1: instead
of no, the batch is cut to the budget (``min(t, budget)``, refused only when budget < 1). Either way
``t + n <= s*m`` holds for every grant. ``grant`` then adds the URLs actually leased to n and to the
fetcher's r, which S1's node choice reads (``u = p*s + q - r``, ``capacity``).

Dispatcher shards (``share``, ``pipeline.dispatch.quotashares``): each shard admits on its part of m in
the current minute, ``m * share(minute)``; while ``share`` answers None (that minute's division among the
shards is not known here yet) the budget is 0 and the wait is to the next second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pipeline.dispatch.quotas import Quotas


def second_of_minute(now: float) -> int:
    """s in 1..60."""
    return int(math.floor(now)) % 60 + 1


def minute_of(now: float) -> int:
    return int(math.floor(now)) // 60


def admit(t: int, budget: float, *, shrink: bool = False) -> int:
    """S1 rule 2: ``t`` if ``t + n <= s*m`` (t <= budget) else 0. ``shrink``: min(t, budget), 0 if < 1."""
    if t < 1 or budget < 1:
        return 0
    if shrink:
        return int(min(t, budget))
    return t if t <= budget else 0


def capacity(*, p: float, q: int, r: int, s: int) -> float:
    """S1's predicted free capacity u = p*s + q - r."""
    return p * s + q - r


@dataclass(slots=True)
class Admission:
    """The per-minute counters n (per service) and r (per fetcher), and S1's admission (rule 2)."""

    quotas: Quotas
    shrink: bool = False  # dispatch.quota_shrink: the deviation from S1 (cut t to the budget, not refuse)
    share: Callable[[int], float | None] | None = None  # a shard's part of m in a minute (module docstring)
    _minute: int | None = None
    _n: dict[str, int] = field(default_factory=dict)
    _r: dict[str, int] = field(default_factory=dict)
    _tokens: dict[str, tuple[float, float]] = field(default_factory=dict)  # service -> (tokens, at)

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
        m = self._quota(service, minute_of(now))
        if m is None:
            return None
        if math.isinf(m):
            return math.inf
        s1 = math.floor(second_of_minute(now) * m + 1e-9) - self._n.get(service, 0)
        paced = self._paced(service, m, now)
        return s1 if paced is None else min(s1, paced)

    def _quota(self, service: str, minute: int | None) -> float | None:
        """m for ``service`` in ``minute``: the quota list's, or this shard's part of it (0 while unknown)."""
        m = self.quotas.quota(service)
        if m is None or math.isinf(m) or self.share is None:
            return m
        part = self.share(minute) if minute is not None else None
        return 0.0 if part is None else m * part

    def _slice(self, m: float) -> int:
        """The most one request asks for: ``slice_s`` seconds' quota, or one second's (at least 1)."""
        share = self.quotas.pace.slice_s
        return max(1, math.ceil(m * share - 1e-9)) if share > 0 else max(1, math.ceil(m))

    def _paced(self, service: str, m: float, now: float) -> float | None:
        """The token bucket's content now (refilled at m/s up to its cap), or None without pacing."""
        burst = self.quotas.pace.burst_s
        if burst <= 0 or m <= 0 or self.shrink:
            return None
        cap = max(float(self._slice(m)), m * burst)
        tokens, at = self._tokens.get(service, (cap, now))
        tokens = min(cap, tokens + m * max(0.0, now - at))
        self._tokens[service] = (tokens, max(at, now))
        return tokens

    def request(self, service: str, wanted: int) -> int:
        """The t our client asks for: ``wanted`` (S3's n_i), at most one slice of the quota (``_slice``:
        one second's without pacing; at least 1)."""
        m = self._quota(service, self._minute)
        if m is None or math.isinf(m) or self.shrink:
            return wanted
        return max(0, min(wanted, self._slice(m)))

    def admitted(self, t: int, budget: float) -> int:
        """S1 rule 2 for a request of ``t``: t when ``t <= budget``, else 0 (refused); see ``admit``."""
        return admit(t, budget, shrink=self.shrink)

    def grant(self, service: str, fetcher_id: str, urls: int, now: float) -> None:
        """n += t, r += t for the URLs actually handed out."""
        self.roll(now)
        self._n[service] = self._n.get(service, 0) + urls
        self._r[fetcher_id] = self._r.get(fetcher_id, 0) + urls
        m = self._quota(service, minute_of(now))
        if m is not None and service in self._tokens and self._paced(service, m, now) is not None:
            tokens, at = self._tokens[service]
            self._tokens[service] = (tokens - urls, at)

    def wait_s(self, service: str, now: float, *, t: int = 1) -> float:
        """Seconds until floor(s*m) - n >= t (a batch of t fits), or until the next minute if later;
        with pacing, no sooner than the token bucket holds t."""
        if self.share is not None and self.share(minute_of(now)) is None:
            return 1.0 - now % 1.0  # this minute's division is not known here yet: asked again next second
        m = self._quota(service, minute_of(now)) or 0.0
        start = minute_of(now) * 60.0
        need = (self.n(service) + max(1, t)) / m if m > 0 else math.inf  # the second s at which it fits
        if need > 60:
            return max(0.0, start + 60 - now)
        wait = max(0.0, start + math.ceil(need) - 1 - now)
        tokens = self._paced(service, m, now) if m > 0 and not math.isinf(m) else None
        if tokens is not None:
            wait = max(wait, (max(1, t) - tokens) / m)
        return wait

    def forget(self, fetcher_id: str) -> None:
        """A fetcher restarted: its r starts again at 0. The URLs its old incarnation was given this minute
        are expired and go to other fetchers; counted against the new one they would keep it out of
        every choice until the minute ends (``capacity``), though nothing is running on it."""
        self._r.pop(fetcher_id, None)

    def n(self, service: str) -> int:
        return self._n.get(service, 0)

    def r(self, fetcher_id: str) -> int:
        return self._r.get(fetcher_id, 0)

    def grants(self) -> Mapping[str, int]:
        """r of every fetcher given URLs this minute, read-only (``roll`` first for the current minute)."""
        return MappingProxyType(self._r)
