"""The fetchers the dispatcher knows: their state, who is live, the fleet's mean page time, S1's ranking.

``Roster`` joins ``FetcherState`` per fetcher, ``Liveness`` (S1's two missed heartbeats), the
``AverageTracker`` behind S3's avg, and the ``CandidateIndex`` that finds the fetcher with the largest
u = p*s + q - r. It keeps the three consistent: a fetcher's t_i counts in avg while it is not dead, and
it is in the index while it is live and below ``max_outstanding`` batches. ``r`` reads S1's grants
this minute (the dispatcher's ``Admission``). It never decides who gets work and never touches the
frontier: the dispatcher does both. Pure; the caller passes ``now``; not thread-safe.

May import: pipeline.settings and the dispatch room's pure rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pipeline.dispatch.admission import capacity, second_of_minute
from pipeline.dispatch.candidates import CandidateIndex
from pipeline.dispatch.fetcherstate import FetcherState
from pipeline.dispatch.liveness import Liveness
from pipeline.dispatch.sizing import AverageTracker, PageTimeHistory, batch_size
from pipeline.settings import DispatchSettings


class Roster:
    __slots__ = ("settings", "max_outstanding", "fetchers", "liveness", "avg", "index", "_r")

    def __init__(self, settings: DispatchSettings, *, max_outstanding: int, r: Callable[[str], int]) -> None:
        self.settings = settings
        self.max_outstanding = max_outstanding
        self.fetchers: dict[str, FetcherState] = {}
        self.liveness = Liveness(settings.heartbeat_s, settings.missed_heartbeats)
        self.avg = AverageTracker()
        self.index = CandidateIndex()
        self._r = r

    def get(self, fetcher_id: str) -> FetcherState | None:
        return self.fetchers.get(fetcher_id)

    def __getitem__(self, fetcher_id: str) -> FetcherState:
        return self.fetchers[fetcher_id]

    def add(self, fetcher_id: str, k: int | None) -> FetcherState:
        """A new fetcher with base batch size ``k`` (the settings' k when None) and an empty history."""
        f = FetcherState(fetcher_id, k or self.settings.k, PageTimeHistory.of(self.settings))
        self.fetchers[fetcher_id] = f
        return f

    def size(self, f: FetcherState) -> int:
        """n_i (S3) from the fetcher's t_i and the fleet's avg."""
        st = self.settings
        return batch_size(k=f.k, t_i=f.history.mean, avg=self.avg.avg, n_min=st.n_min, n_max=st.n_max)

    def is_live(self, fetcher_id: str, now: float) -> bool:
        return self.liveness.is_live(fetcher_id, now)

    def any_live(self, now: float) -> bool:
        return any(self.liveness.is_live(fid, now) for fid in self.fetchers)

    def may_take(self, f: FetcherState, now: float) -> bool:
        """Live and below ``max_outstanding`` batches: may be given a batch now."""
        return len(f.outstanding) < self.max_outstanding and self.liveness.is_live(f.fetcher_id, now)

    def revive(self, f: FetcherState, now: float) -> None:
        """A heartbeat or a registration: the fetcher is live (again), its t_i counts, it is ranked."""
        self.liveness.revive(f.fetcher_id, now)
        self.sync_avg(f)
        self.sync(f, now)

    def touch(self, fetcher_id: str, now: float) -> None:
        """An offer or a completion: keeps a live fetcher live, never revives a dead one."""
        self.liveness.touch(fetcher_id, now)

    def sweep(self, now: float) -> list[FetcherState]:
        """Declare dead every fetcher silent too long; returns them (sorted by id), out of avg, death counted."""
        dead = []
        for fid in self.liveness.sweep(now):
            f = self.fetchers.get(fid)
            if f is None:
                continue
            f.deaths += 1
            self.avg.remove(fid)
            dead.append(f)
        return dead

    def ready(self, now: float) -> None:
        """Make the candidate index valid for this second (u = p*s + q - r changes with s)."""
        second = math.floor(now)
        if self.index.second == second:
            return
        s = second_of_minute(now)
        r = self._r
        self.index.rebuild(second, (
            (fid, capacity(p=f.p, q=f.q, r=r(fid), s=s)) for fid, f in self.fetchers.items()
            if self.may_take(f, now)
        ))  # fmt: skip

    def sync(self, f: FetcherState, now: float) -> None:
        """Re-key one fetcher after its p, q, r, outstanding or liveness changed."""
        if self.index.second != math.floor(now):
            return  # the next decision rebuilds the whole index anyway
        if self.may_take(f, now):
            self.index.put(
                f.fetcher_id, capacity(p=f.p, q=f.q, r=self._r(f.fetcher_id), s=second_of_minute(now))
            )
        else:
            self.index.discard(f.fetcher_id)

    def sync_avg(self, f: FetcherState) -> None:
        """Count the fetcher's t_i in avg, unless it is dead."""
        t = f.history.mean
        if t is not None and not self.liveness.is_dead(f.fetcher_id):
            self.avg.set(f.fetcher_id, t)
