"""S3 batch sizing: n_i = k * avg / t_i, clamped to [n_min, n_max], with n(0) = k.

- *Vertical* comparison: t_i is the mean seconds-per-page over fetcher i's last ``history_window``
  completed batches (a fixed-length window, as in S5), so one slow round moves it by at most 1/window.
- *Horizontal* comparison: avg is the mean of t_i over the live fetchers that have a history.
- A fetcher with no history gets k (n(0) = k); so does everyone while no fetcher has a history.

Rounding is to the nearest integer (a fetcher 4x as fast as another gets 4x the URLs, give or take one).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from pipeline.settings import Settings


@dataclass(slots=True)
class PageTimeHistory:
    """The last ``window`` per-page times of one fetcher; ``mean`` is t_i (None when empty)."""

    window: int
    _samples: deque[float] = field(default_factory=deque)
    _sum: float = 0.0

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError("history window must be >= 1")

    def add(self, seconds_per_page: float) -> None:
        if not seconds_per_page > 0.0:  # also rejects NaN
            raise ValueError(f"per-page time must be > 0, got {seconds_per_page!r}")
        self._samples.append(seconds_per_page)
        self._sum += seconds_per_page
        if len(self._samples) > self.window:
            self._sum -= self._samples.popleft()
        # Re-add exactly now and then so the running sum never drifts (cheap: window is small).
        if len(self._samples) == self.window:
            self._sum = sum(self._samples)

    @property
    def mean(self) -> float | None:
        return self._sum / len(self._samples) if self._samples else None

    def __len__(self) -> int:
        return len(self._samples)


def batch_size(*, k: int, t_i: float | None, avg: float | None, n_min: int, n_max: int) -> int:
    """n_i = round(k * avg / t_i) clamped to [n_min, n_max]; k (also clamped) without a history."""
    if n_min < 1 or n_max < n_min:
        raise ValueError(f"need 1 <= n_min <= n_max, got {n_min}, {n_max}")
    n = k if t_i is None or avg is None else round(k * avg / t_i)
    return max(n_min, min(n_max, n))


@dataclass(slots=True)
class AverageTracker:
    """The horizontal avg: a sum and count over the fetchers currently contributing a t_i.

    The dispatcher calls ``set(fid, t)`` when a live fetcher's t_i changes and ``remove(fid)`` when it
    dies, so avg costs O(1) per decision instead of a scan over the fleet.
    """

    _values: dict[str, float] = field(default_factory=dict)
    _sum: float = 0.0
    _updates: int = 0

    def set(self, fetcher_id: str, t: float) -> None:
        self._sum += t - self._values.get(fetcher_id, 0.0)
        self._values[fetcher_id] = t
        self._tick()

    def remove(self, fetcher_id: str) -> None:
        old = self._values.pop(fetcher_id, None)
        if old is not None:
            self._sum -= old
            self._tick()

    def _tick(self) -> None:
        # Float add/subtract drifts; recompute exactly every few thousand updates.
        self._updates += 1
        if self._updates % 4096 == 0 or not self._values:
            self._sum = sum(self._values.values())

    @property
    def avg(self) -> float | None:
        return self._sum / len(self._values) if self._values else None

    def __contains__(self, fetcher_id: object) -> bool:
        return fetcher_id in self._values


def local_slots(settings: Settings) -> int:
    """How many virtual fetchers keep ``fetch.concurrency`` sockets busy under the host limits.

    Twice the bare minimum: a batch's tail (its last few URLs) leaves most of its sockets idle, so a
    second generation of batches must already be running to fill them.
    """
    hosts_per_batch = max(1, settings.dispatch.k // max(1, settings.dispatch.k // 4))
    sockets_per_batch = hosts_per_batch * max(1, settings.politeness.per_host_concurrency)
    return max(4, min(128, 2 * -(-settings.fetch.concurrency // sockets_per_batch)))
