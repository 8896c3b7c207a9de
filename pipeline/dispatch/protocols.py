"""The dispatcher's seams: what it needs from a frontier, and the small records it exchanges.

The frontier (``pipeline/frontier/frontier.py``) owns per-host queues and politeness timing; the dispatcher
owns *who* gets *how many* URLs *when*. ``FrontierLike`` is the exact contract between the two.

Frontier contract (the dispatcher relies on every clause):

- ``lease(fetcher_id, n, now)`` returns at most ``n`` tasks (possibly none), grouped by host. Every host
  that contributed a task is leased to ``fetcher_id`` and to no one else until that fetcher is released;
  a leased host contributes to no other lease. URLs returned are no longer pending in the frontier.
- ``release(fetcher_id, now, host_delays=...)`` returns every host leased to ``fetcher_id``.
  ``host_delays`` maps host -> seconds from ``now`` before that host may be leased again (Crawl-delay,
  Retry-After, back-off); hosts not named use the frontier's own politeness delay. Releasing a fetcher
  that holds nothing is a no-op.
- ``requeue(fetcher_id, tasks)`` puts tasks that were leased to ``fetcher_id`` back as pending. The
  dispatcher re-queues a task of a batch at most once (a batch is closed by its first completion or
  expiry, and ``unfinished`` is filtered to the batch's own tasks, each once), so a frontier need not
  deduplicate -- as long as nobody else re-queues tasks of a batch that is still outstanding. It does not
  release hosts; the dispatcher always calls ``requeue`` *before* ``release`` so the URLs are back when
  the host is free.
- ``available(now)`` estimates how many URLs ``lease`` could hand out now. It may over-estimate, but it
  must not return 0 while something is leasable: the dispatcher answers ``empty`` on 0 without leasing.

The dispatcher calls ``release`` for a fetcher only when that fetcher has no batch outstanding, because
the frontier releases per fetcher, not per batch (releasing earlier would free a host still being fetched).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from fetchers.records import UrlTask

# Refusal reasons. A client that is refused waits and asks again (S1); the reason says what to fix.
UNKNOWN_SERVICE: Final = "unknown_service"  # the service is not in the quota list (S1 rule 1)
QUOTA: Final = "quota"  # t + n > s*m would hold for every t >= 1 (S1 rule 2)
NOT_LIVE: Final = "not_live"  # the offering fetcher is declared dead
EMPTY: Final = "empty"  # the frontier has nothing leasable now
UNKNOWN_FETCHER: Final = "unknown_fetcher"  # offer() from a fetcher that never registered
BUSY: Final = "busy"  # offer() from a fetcher already holding max_outstanding batches

# Why a completion was dropped (DispatcherStats.dropped keys).
DROP_UNKNOWN: Final = "unknown"  # never issued by this dispatcher (or from before a restart)
DROP_EXPIRED: Final = "expired"  # its fetcher was declared dead or its lease ran out; tasks re-queued
DROP_DUPLICATE: Final = "duplicate"  # already completed (a replayed/re-delivered result)
DROP_WRONG_FETCHER: Final = "wrong_fetcher"  # completed by a fetcher other than the one it was issued to


@runtime_checkable
class FrontierLike(Protocol):
    """Per-host URL queues with host leases. See the module docstring for the full contract."""

    def lease(self, fetcher_id: str, n: int, now: float) -> list[UrlTask]: ...

    def release(self, fetcher_id: str, now: float, *, host_delays: Mapping[str, float] = {}) -> None: ...

    def requeue(self, fetcher_id: str, tasks: Sequence[UrlTask]) -> None: ...

    def available(self, now: float) -> int: ...


@dataclass(slots=True)
class Heartbeat:
    """S1 heartbeat: a fetcher reports on its own every ``heartbeat_s``; the dispatcher never calls it.

    ``rate`` is p (URLs/s over the last period), ``free_slots`` is q. ``sent_at`` orders heartbeats of
    one fetcher: an older heartbeat arriving after a newer one is ignored (except as a sign of life).
    """

    fetcher_id: str
    sent_at: float
    successes: int
    failures: int
    rate: float
    free_slots: int
    address: str = ""


@dataclass(slots=True)
class Refusal:
    """A "no" from the dispatcher. ``retry_after_s`` is a hint for when asking again may succeed."""

    reason: str
    retry_after_s: float = 0.0
    detail: str = ""


@dataclass(slots=True)
class FetcherStats:
    """One fetcher as the dispatcher sees it. ``t`` is None until its first completed batch."""

    fetcher_id: str
    address: str
    k: int
    n: int  # the batch size S3 would give it now
    t: float | None  # running-average seconds per page (S3 vertical comparison)
    count: int  # completed batches
    live: bool
    r: int  # URLs given this minute (S1)
    p: float  # rate from the last heartbeat
    q: int  # free slots from the last heartbeat
    u: float  # p*s + q - r at the snapshot's second
    outstanding: int  # batches issued and not yet completed/expired
    successes: int
    failures: int
    deaths: int  # times declared dead


@dataclass(slots=True)
class ServiceStats:
    service: str
    quota: float | None  # URLs/s; None = unlimited
    n: int  # URLs granted this minute
    granted_total: int
    batches_total: int
    refusals: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class DispatcherStats:
    now: float
    second: int  # s, 1..60
    fetchers: dict[str, FetcherStats]
    services: dict[str, ServiceStats]
    avg_t: float | None  # mean t over live fetchers with history (S3 horizontal comparison)
    in_flight: int  # batches outstanding
    in_flight_urls: int
    refusals: dict[str, int]  # all refusals by reason, including unknown services
    dropped: dict[str, int]  # completions dropped, by reason
    duplicates_dropped: int  # sum of ``dropped``
    expired_total: int  # serials expired (death or lease timeout)
    requeued_urls: int
    last_serial: int  # 0 before the first batch
