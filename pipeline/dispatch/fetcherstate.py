"""What the dispatcher keeps about one fetcher (S3 history, S1 heartbeat figures, batches out), and
the read-only ``FetcherStats`` it shows of it. Pure data; the dispatcher owns every change."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.dispatch.admission import capacity
from pipeline.dispatch.protocols import FetcherStats
from pipeline.dispatch.sizing import PageTimeHistory


@dataclass(slots=True)
class FetcherState:
    fetcher_id: str
    k: int
    history: PageTimeHistory
    address: str = ""
    count: int = 0
    p: float = 0.0  # S1: download rate from the last heartbeat
    q: int = 0  # S1: free slots from the last heartbeat
    successes: int = 0
    failures: int = 0
    last_sent_at: float | None = None
    deaths: int = 0
    outstanding: set[int] = field(default_factory=set)
    pending_delays: dict[str, float] = field(default_factory=dict)

    def stats(self, *, n: int, r: int, s: int, live: bool) -> FetcherStats:
        """This fetcher as the dispatcher sees it at second ``s`` (u = p*s + q - r)."""
        return FetcherStats(
            fetcher_id=self.fetcher_id, address=self.address, k=self.k, n=n, t=self.history.mean,
            count=self.count, live=live, r=r, p=self.p, q=self.q, u=capacity(p=self.p, q=self.q, r=r, s=s),
            outstanding=len(self.outstanding), successes=self.successes, failures=self.failures,
            deaths=self.deaths,
        )  # fmt: skip
