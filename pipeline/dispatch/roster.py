"""The fetchers the dispatcher knows: their state, who is live, the fleet's mean page time.

``Roster`` joins ``FetcherState`` per fetcher, ``Liveness`` (S1's two missed heartbeats) and the
``AverageTracker`` behind S3's avg, and keeps them consistent: a fetcher's t_i counts in avg while it is
not dead. It never decides who gets work and never touches the frontier: the dispatcher does both (and
S1's choice of a node is the fleet's, ``pipeline.dispatch.nodechoice``). Pure; the caller passes
``now``; not thread-safe.

May import: pipeline.settings and the dispatch room's pure rules.
"""

from __future__ import annotations

from pipeline.dispatch.fetcherstate import FetcherState
from pipeline.dispatch.liveness import Liveness
from pipeline.dispatch.sizing import AverageTracker, PageTimeHistory, batch_size
from pipeline.settings import DispatchSettings


class Roster:
    __slots__ = ("settings", "fetchers", "liveness", "avg")

    def __init__(self, settings: DispatchSettings) -> None:
        self.settings = settings
        self.fetchers: dict[str, FetcherState] = {}
        self.liveness = Liveness(settings.heartbeat_s, settings.missed_heartbeats)
        self.avg = AverageTracker()

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

    def revive(self, f: FetcherState, now: float) -> None:
        """A heartbeat or a registration: the fetcher is live (again) and its t_i counts."""
        self.liveness.revive(f.fetcher_id, now)
        self.sync_avg(f)

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

    def sync_avg(self, f: FetcherState) -> None:
        """Count the fetcher's t_i in avg, unless it is dead."""
        t = f.history.mean
        if t is not None and not self.liveness.is_dead(f.fetcher_id):
            self.avg.set(f.fetcher_id, t)
