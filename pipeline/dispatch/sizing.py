"""S3 batch sizing: n_i = k * avg / t_i, clamped to [n_min, n_max], with n(0) = k.

- *Vertical* comparison: t_i is fetcher i's time per page over its last ``history_window`` completed
  batches, each weighted ``0.5 ** (age / history_halflife)`` (age 0 = the newest batch): total weighted
  seconds over total weighted pages (``page_time``). The window bounds the memory; the half-life makes
  t_i forget the start (robots.txt, cold DNS, n(0) = k batches whose fixed costs weigh more per page)
  within a few batches and follow a fetcher whose speed changes. ``history_halflife = 0`` weighs every
  batch in the window alike (a plain mean). Pages, not batches, carry the weight inside a
  batch's share, so a short batch cut by the frontier moves t_i by its few pages, not by a whole vote.
- *Horizontal* comparison: avg is the mean of t_i over the live fetchers that have a history.
- A fetcher with no history gets k (n(0) = k); so does everyone while no fetcher has a history.

Why forgetting matters beyond noise: a batch's time is F + n*b_i (a fixed part per batch and a part per
page), so t_i measured at one size is wrong at another; n_i * t_i = k * avg for every fetcher only
when t_i was measured at the fetcher's current n_i, which is what S3's "finish at about the same time"
needs. A long plain mean keeps the n(0) = k rounds in t_i long after n_i moved away from k.

Rounding is to the nearest integer (a fetcher 4x as fast as another gets 4x the URLs, give or take one).
``settled_round`` says from which round on every fetcher's batch size has stopped moving (the bench's
warm-up, the same rule for S3's sizes and for equal batches).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.settings import DispatchSettings, Settings


def page_time(samples: Sequence[tuple[float, int]], *, halflife: float) -> float | None:
    """t_i from ``samples`` = (seconds, pages) per batch, oldest first; None when there are none.

    sum(w * seconds) / sum(w * pages) with w = 0.5 ** (age / halflife), age 0 for the last sample;
    ``halflife <= 0`` gives every sample w = 1. Pure; the caller validates the samples."""
    if not samples:
        return None
    decay = 0.5 ** (1.0 / halflife) if halflife > 0 else 1.0
    w, secs, pages = 1.0, 0.0, 0.0
    for s, p in reversed(samples):  # newest first: weights 1, decay, decay**2, ...
        secs += w * s
        pages += w * p
        w *= decay
    return secs / pages


@dataclass(slots=True)
class PageTimeHistory:
    """The last ``window`` batches of one fetcher; ``mean`` is t_i (None when empty), see ``page_time``."""

    window: int
    halflife: float = 0.0
    _samples: deque[tuple[float, int]] = field(default_factory=deque)
    _mean: float | None = None

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError("history window must be >= 1")
        if not self.halflife >= 0.0:  # also rejects NaN
            raise ValueError(f"history half-life must be >= 0, got {self.halflife!r}")

    @classmethod
    def of(cls, settings: DispatchSettings) -> PageTimeHistory:
        """The estimator the dispatch settings ask for (``history_window``, ``history_halflife``)."""
        return cls(settings.history_window, settings.history_halflife)

    def add(self, seconds_per_page: float, *, pages: int = 1) -> None:
        """One completed batch: ``pages`` URLs at ``seconds_per_page`` each (the batch's time / pages)."""
        if not seconds_per_page > 0.0 or seconds_per_page == float("inf"):  # also rejects NaN
            raise ValueError(f"per-page time must be > 0 and finite, got {seconds_per_page!r}")
        if pages < 1:
            raise ValueError(f"a batch sample needs pages >= 1, got {pages!r}")
        self._samples.append((seconds_per_page * pages, pages))
        if len(self._samples) > self.window:
            self._samples.popleft()
        # Recomputed from the window each time (window is small): no running sum to drift.
        self._mean = page_time(self._samples, halflife=self.halflife)

    @property
    def mean(self) -> float | None:
        return self._mean

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


@dataclass(frozen=True, slots=True)
class Settled:
    """``round``: the first round from which every fetcher is settled (None: not within the rounds
    given); ``per_fetcher``: the first round each fetcher alone is settled (None: never)."""

    round: int | None
    per_fetcher: tuple[int | None, ...]


def settled_round(
    sizes: Sequence[Sequence[int]],
    *,
    min_batches: int,
    span: int,
    tolerance: float,
    wanted: Sequence[Sequence[int]] | None = None,
) -> Settled:
    """When the batch sizes of every fetcher have stopped moving.

    ``sizes[i][r]`` is the size of fetcher i's r-th batch (as issued). Fetcher i is settled at round r
    when it had completed at least ``min_batches`` batches before it (r >= min_batches: t_i has that
    many samples) and its sizes over rounds r - span + 1 .. r are within ``tolerance`` of each other
    (max / min - 1 <= tolerance). With ``wanted`` (the size n_i asked for each batch, same shape), a
    batch the frontier cut to less than ``wanted / (1 + tolerance)`` also keeps its span unsettled: a
    node held at 4 URLs a batch by a short frontier has steady sizes, but not the ones its sizing
    chose. The answer is the first round at which *all* fetchers are settled at once; only rounds every
    fetcher reached are considered. Nothing after that round is judged again: the caller counts every
    later round, whatever it looks like.
    """
    if min_batches < 0 or span < 1 or not tolerance >= 0.0:
        raise ValueError(
            f"need min_batches >= 0, span >= 1, tolerance >= 0; got {min_batches}, {span}, {tolerance}"
        )
    eps = 1e-12

    def ok(i: int, r: int) -> bool:
        seq = sizes[i]
        if r < min_batches or r + 1 < span:
            return False
        tail = seq[r - span + 1 : r + 1]
        if wanted is not None and any(
            n * (1.0 + tolerance) + eps < w
            for n, w in zip(tail, wanted[i][r - span + 1 : r + 1], strict=True)
        ):
            return False
        return min(tail) > 0 and max(tail) / min(tail) - 1.0 <= tolerance + eps

    rounds = min((len(s) for s in sizes), default=0)
    per = tuple(next((r for r in range(len(s)) if ok(i, r)), None) for i, s in enumerate(sizes))
    first = next((r for r in range(rounds) if all(ok(i, r) for i in range(len(sizes)))), None)
    return Settled(first, per)
