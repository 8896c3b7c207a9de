"""The dispatcher: S3 batch sizing + S1 quota admission + liveness + serial ids over a frontier.

``offer(fetcher_id, service)``: an idle fetcher asks for work -- the embedded engine's fetchers, and in
the fleet the idle fetcher of the node S1 chose (``pipeline.dispatch.nodechoice``, through the fleet's
node table). No I/O; injected clock; not thread-safe.

Decision order of ``offer``:
  1. unknown service -> ``unknown_service`` (logged once per service); budget = floor(s*m) - n < 1 ->
     ``quota``; an unknown fetcher -> ``unknown_fetcher``; a dead one -> ``not_live``; one holding
     ``max_outstanding`` batches -> ``busy``.
  2. t = the request for n_i (S3), at most one second's quota (``Admission.request``); admitted when
     t + n <= s*m, else refused (``quota``) -- S1 answers no, it does not cut the batch
     (``dispatch.quota_shrink`` does, as a documented deviation). Nothing leasable -> ``empty``.
  3. frontier.lease(fetcher, t, now): the batch is the URLs actually leased (<= t), and S1's n and the
     fetcher's r grow by that count.
S1's u > t test belongs to the choice of the node, made with the heartbeats' p and q before the fetcher
is offered work; the dispatcher keeps each fetcher's p and q (``heartbeat``) for the snapshot.

At most ``max_outstanding`` batches (default 1) are out per fetcher (else ``busy``): the frontier
releases hosts per fetcher, and a fetcher that never reaches zero batches would hold them for ever.

Signs of life: ``register`` and ``heartbeat`` make a fetcher live (and bring back a dead one);
``offer`` and ``complete`` keep a live fetcher live but never revive a dead one. ``tick`` declares dead
every fetcher silent for missed_heartbeats * heartbeat_s, expires its batches and re-queues their URLs;
it also expires any batch whose lease is older than lease_s (lease_s <= 0 disables that): a lease starts
when the batch is issued and again whenever its fetcher says it still holds it (``renew``, from the
fleet node's heartbeat), so lease expiry catches a batch its live fetcher has lost, not a slow one.
Completions for unknown, expired or already-completed serials return False and are counted, which is
how a re-delivered or duplicated batch never stores a page twice.

Who the fetchers are and whether they are live: roster.py. The batches out and the serials closed
(the duplicate check): ledger.py. This module decides; those two keep the state."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from fetchers.records import Batch, UrlTask
from pipeline.dispatch import protocols as P
from pipeline.dispatch.admission import Admission, second_of_minute
from pipeline.dispatch.fetcherstate import FetcherState
from pipeline.dispatch.ledger import BatchLedger
from pipeline.dispatch.protocols import DispatcherStats, FrontierLike, Heartbeat, Refusal
from pipeline.dispatch.protocols import ServiceStats as _ServiceStats
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.roster import Roster
from pipeline.dispatch.serials import SerialAllocator
from pipeline.settings import DispatchSettings

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self,
        settings: DispatchSettings,
        *,
        frontier: FrontierLike,
        quotas: Quotas,
        serials: SerialAllocator,
        clock: Callable[[], float],
        max_outstanding: int = 1,
        quota_share: Callable[[int], float | None] | None = None,
    ) -> None:
        if max_outstanding < 1:
            raise ValueError("max_outstanding must be >= 1")
        if settings.n_min < 1 or settings.n_max < settings.n_min or settings.k < 1:
            raise ValueError("dispatch settings need k >= 1 and 1 <= n_min <= n_max")
        self.settings = settings
        self._frontier = frontier
        self._quotas = quotas
        self._serials = serials
        self._clock = clock
        self.max_outstanding = max_outstanding
        self._admission = Admission(quotas, shrink=settings.quota_shrink, share=quota_share)  # share: a shard's part
        self._warned_unknown: set[str] = set()
        self._roster = Roster(settings)
        self._ledger = BatchLedger()
        self._services: dict[str, _ServiceStats] = {}
        self._refusals: dict[str, int] = {}

    # --- fetchers --------------------------------------------------------------------------------
    def register(self, fetcher_id: str, *, k: int | None = None, address: str = "") -> None:
        """Add a fetcher, or re-add one that restarted: its outstanding batches (which it has forgotten)
        are expired and re-queued. Its page-time history is kept. Registration makes it live."""
        now = self._clock()
        f = self._roster.get(fetcher_id)
        if f is None:
            f = self._roster.add(fetcher_id, k)
        else:
            for serial in sorted(f.outstanding):
                self._expire(serial, now)
            self._admission.forget(fetcher_id)  # a new incarnation: nothing given to it runs (S1's r)
            if k is not None:
                f.k = k
        f.address = address or f.address
        f.last_sent_at = None  # a restarted fetcher's clock may restart too
        self._roster.revive(f, now)

    def heartbeat(self, hb: Heartbeat) -> None:
        """Record p, q and counters. Unknown fetchers are registered with the default k. A heartbeat
        older (by ``sent_at``) than the last one seen from that fetcher is ignored entirely."""
        f = self._roster.get(hb.fetcher_id)
        if f is None:
            self.register(hb.fetcher_id, address=hb.address)
            f = self._roster[hb.fetcher_id]
        if f.last_sent_at is not None and hb.sent_at <= f.last_sent_at:
            return
        f.last_sent_at = hb.sent_at
        f.p, f.q = max(0.0, float(hb.rate)), max(0, int(hb.free_slots))
        f.successes, f.failures = hb.successes, hb.failures
        f.address = hb.address or f.address
        self._roster.revive(f, self._clock())

    def renew(self, fetcher_id: str, serials: Iterable[int]) -> int:
        """``fetcher_id`` says it still holds ``serials``: their leases start again now (``lease_s``
        expires a batch its live holder no longer reports, not one it is still storing). Returns how
        many were renewed; a serial not out to that fetcher is ignored."""
        now = self._clock()
        return sum(self._ledger.renew(serial, fetcher_id, now) for serial in serials)

    # --- work ------------------------------------------------------------------------------------
    def offer(self, fetcher_id: str, service: str, *, limit: int | None = None) -> Batch | Refusal:
        """An idle fetcher asks for work: S3 sizes the batch, S1's quota admits it (see the module docstring).

        ``limit`` caps the batch (e.g. a page budget); never trim ``Batch.tasks`` after the fact, because
        the dispatcher re-queues the batch as issued if it expires."""
        now = self._clock()
        budget = self._budget_or_refusal(service, now)
        if isinstance(budget, Refusal):
            return budget
        f = self._roster.get(fetcher_id)
        if f is None:
            return self._refuse(service, P.UNKNOWN_FETCHER, 0.0)
        if not self._roster.is_live(fetcher_id, now):
            return self._refuse(service, P.NOT_LIVE, 0.0, detail="heartbeat or register again")
        self._roster.touch(fetcher_id, now)
        if len(f.outstanding) >= self.max_outstanding:
            return self._refuse(service, P.BUSY, 0.0, detail=f"{len(f.outstanding)} batch(es) outstanding")
        n = self._roster.size(f)
        asked = self._admission.request(service, n if limit is None else min(n, limit))
        t = self._admission.admitted(asked, budget)
        if asked >= 1 and t < 1:  # S1 rule 2: t + n > s*m -> no (not a smaller batch)
            return self._refuse(service, P.QUOTA, self._admission.wait_s(service, now, t=asked))
        if t < 1 or self._frontier.available(now) <= 0:
            return self._refuse(service, P.EMPTY, 1.0)
        return self._lease(f, service, t, now)

    def complete(
        self,
        serial: int,
        *,
        fetcher_id: str,
        pages: int,
        elapsed_s: float,
        host_delays: Mapping[str, float] = {},
        unfinished: Sequence[UrlTask] = (),
    ) -> bool:
        """A fetcher returns batch ``serial``: ``pages`` URLs finished (any outcome) in ``elapsed_s``.

        Updates t_i with elapsed_s/pages (when both > 0), re-queues ``unfinished`` (only tasks that were
        in the batch, each once), and releases the fetcher's hosts once it has no batch outstanding,
        passing the largest delay reported per host over those batches. Returns False, counting why,
        for an unknown, expired, already-completed or wrong-fetcher serial (nothing else changes).
        """
        now = self._clock()
        batch = self._ledger.take(serial, fetcher_id)
        if batch is None:
            return False
        f = self._roster[fetcher_id]
        f.outstanding.discard(serial)
        self._roster.touch(fetcher_id, now)
        if pages > 0 and elapsed_s > 0 and math.isfinite(elapsed_s):
            f.history.add(elapsed_s / pages, pages=pages)
            self._roster.sync_avg(f)
        f.count += 1
        if unfinished:
            in_batch = {(t.url_id, t.url): t for t in batch.tasks}
            back = [in_batch.pop(key) for key in ((t.url_id, t.url) for t in unfinished) if key in in_batch]
            if back:
                self._frontier.requeue(fetcher_id, back)
                self._ledger.requeued_urls += len(back)
        for host, delay in host_delays.items():
            f.pending_delays[host] = max(delay, f.pending_delays.get(host, 0.0))
        if not f.outstanding:
            self._release(f, now)
        return True

    def tick(self) -> list[int]:
        """Liveness sweep and lease expiry; returns the serials expired by this call, ascending."""
        now = self._clock()
        self._admission.roll(now)
        expired: list[int] = []
        for f in self._roster.sweep(now):
            for serial in sorted(f.outstanding):
                self._expire(serial, now)
                expired.append(serial)
        if self.settings.lease_s > 0:
            late = self._ledger.leased_by(now - self.settings.lease_s)
            for serial in late:
                self._expire(serial, now)
            expired.extend(late)
        return sorted(expired)

    def restore_grant(self, service: str, fetcher_id: str, urls: int) -> None:
        """Count ``urls`` a dead predecessor granted ``fetcher_id`` this minute, so S1's n and r hold."""
        self._admission.grant(service, fetcher_id, urls, self._clock())

    # --- introspection ---------------------------------------------------------------------------
    def snapshot(self) -> DispatcherStats:
        now = self._clock()
        self._admission.roll(now)
        s = second_of_minute(now)
        roster, ledger = self._roster, self._ledger
        fetchers = {fid: f.stats(n=roster.size(f), r=self._admission.r(fid), s=s, live=roster.is_live(fid, now))
                    for fid, f in roster.fetchers.items()}  # fmt: skip
        services = {}
        for name, st in self._services.items():
            m = self._quotas.quota(name)
            services[name] = _ServiceStats(
                service=name, quota=None if m is None or math.isinf(m) else m,
                n=self._admission.n(name), granted_total=st.granted_total,
                batches_total=st.batches_total, refusals=dict(st.refusals),
            )  # fmt: skip
        return DispatcherStats(
            now=now, second=s, fetchers=fetchers, services=services, avg_t=roster.avg.avg,
            in_flight=len(ledger), in_flight_urls=ledger.urls(),
            refusals=dict(self._refusals), dropped=dict(ledger.dropped),
            duplicates_dropped=sum(ledger.dropped.values()), expired_total=ledger.expired_total,
            requeued_urls=ledger.requeued_urls, last_serial=self._serials.last,
        )  # fmt: skip

    def quota_of(self, service: str) -> float | None:  # m; None when unknown or unlimited
        return None if (m := self._quotas.quota(service)) is None or math.isinf(m) else m

    def is_live(self, fetcher_id: str) -> bool:  # may be given work now
        return self._roster.is_live(fetcher_id, self._clock())

    def batch_size(self, fetcher_id: str) -> int:
        """n_i for a known fetcher (S3), before admission."""
        return self._roster.size(self._roster[fetcher_id])

    def request_size(self, fetcher_id: str, service: str) -> int:  # t: n_i, at most one second's quota
        return self._admission.request(service, self._roster.size(self._roster[fetcher_id]))

    def grants_this_minute(self) -> Mapping[str, int]:
        """Every fetcher's r at once (fetchers given nothing this minute are absent): a read-only view that
        follows later grants until the next minute's reset, for a choice that reads many fetchers."""
        self._admission.roll(self._clock())
        return self._admission.grants()

    def outstanding(self) -> list[Batch]:
        """Batches issued and not yet completed or expired, oldest first."""
        return self._ledger.batches()

    # --- internals -------------------------------------------------------------------------------
    def _budget_or_refusal(self, service: str, now: float) -> float | Refusal:
        budget = self._admission.budget(service, now)
        if budget is None:
            if (
                service not in self._warned_unknown
            ):  # S1 rule 1, said once per service (asked again and again)
                self._warned_unknown.add(service)
                log.error("service %r is not in the quota list: S1 refuses every request for it", service)
            return self._refuse(None, P.UNKNOWN_SERVICE, 0.0, detail=service)
        self._services.setdefault(service, _ServiceStats(service, None, 0, 0, 0))
        if budget < 1:
            return self._refuse(service, P.QUOTA, self._admission.wait_s(service, now))
        return budget

    def _lease(self, f: FetcherState, service: str, t: int, now: float) -> Batch | Refusal:
        tasks = self._frontier.lease(f.fetcher_id, t, now)[:t] if t > 0 else []
        if not tasks:
            if not f.outstanding:
                self._release(f, now)  # nothing leased; make sure no host stays held for nothing
            return self._refuse(service, P.EMPTY, 1.0)
        batch = Batch(serial=self._serials.next(), fetcher_id=f.fetcher_id, tasks=tasks,
                      service=service, issued_at=now)  # fmt: skip
        self._ledger.issue(Batch(batch.serial, f.fetcher_id, list(tasks), service, now))
        f.outstanding.add(batch.serial)
        self._admission.grant(service, f.fetcher_id, len(tasks), now)
        st = self._services[service]
        st.granted_total += len(tasks)
        st.batches_total += 1
        return batch

    def _expire(self, serial: int, now: float) -> None:
        batch = self._ledger.expire(serial)
        f = self._roster[batch.fetcher_id]
        f.outstanding.discard(serial)
        self._frontier.requeue(batch.fetcher_id, batch.tasks)
        self._ledger.requeued_urls += len(batch.tasks)
        if not f.outstanding:
            self._release(f, now)

    def _release(self, f: FetcherState, now: float) -> None:
        delays, f.pending_delays = f.pending_delays, {}
        self._frontier.release(f.fetcher_id, now, host_delays=delays)

    def _refuse(self, service: str | None, reason: str, retry_after_s: float, *, detail: str = "") -> Refusal:
        self._refusals[reason] = self._refusals.get(reason, 0) + 1
        if service is not None and service in self._services:
            refusals = self._services[service].refusals
            refusals[reason] = refusals.get(reason, 0) + 1
        return Refusal(reason, retry_after_s, detail)
