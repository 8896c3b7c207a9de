"""S1 liveness: a fetcher silent for ``missed`` heartbeat periods is excluded.

"Silent" is measured on the dispatcher's clock (receipt time), never on the fetcher's ``sent_at``, so a
fetcher with a skewed clock is judged fairly. A fetcher is live while ``now - last_seen < missed *
period``; at exactly ``missed * period`` it has missed both periods and is dead.

Dead is sticky: once ``sweep`` declares a fetcher dead, only ``revive`` (a heartbeat or a register)
brings it back. Other messages from a dead fetcher (a late completion, an offer) do not revive it; the
dispatcher has already re-queued its work, and it must say hello again before it gets more.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Liveness:
    period_s: float
    missed: int = 2
    _last_seen: dict[str, float] = field(default_factory=dict)
    _dead: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.period_s <= 0 or self.missed < 1:
            raise ValueError("heartbeat period must be > 0 and missed >= 1")

    @property
    def timeout_s(self) -> float:
        return self.period_s * self.missed

    def revive(self, fetcher_id: str, now: float) -> bool:
        """Record a heartbeat/registration; returns True if the fetcher was dead (or unknown) before."""
        was_dead = fetcher_id in self._dead or fetcher_id not in self._last_seen
        self._dead.discard(fetcher_id)
        self._last_seen[fetcher_id] = max(now, self._last_seen.get(fetcher_id, now))
        return was_dead

    def touch(self, fetcher_id: str, now: float) -> None:
        """A sign of life that does not revive (offer, completion): only refreshes a live fetcher."""
        if fetcher_id in self._last_seen and fetcher_id not in self._dead:
            self._last_seen[fetcher_id] = max(now, self._last_seen[fetcher_id])

    def is_live(self, fetcher_id: str, now: float) -> bool:
        if fetcher_id in self._dead:
            return False
        seen = self._last_seen.get(fetcher_id)
        return seen is not None and now - seen < self.timeout_s

    def sweep(self, now: float) -> list[str]:
        """Declare dead every fetcher silent for ``timeout_s``; return the newly dead, sorted."""
        limit = now - self.timeout_s
        newly = sorted(f for f, seen in self._last_seen.items() if seen <= limit and f not in self._dead)
        self._dead.update(newly)
        return newly

    def is_dead(self, fetcher_id: str) -> bool:
        return fetcher_id in self._dead

    def last_seen(self, fetcher_id: str) -> float | None:
        return self._last_seen.get(fetcher_id)
