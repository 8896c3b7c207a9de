"""The dispatcher's batch ledger: which batches are out, and what became of the serials closed.

``issue`` records a batch under its serial and starts its lease; ``renew`` restarts the lease of a batch
its fetcher says it still holds (a node storing pages through a store outage is busy, not lost);
``take`` closes a batch its fetcher returned, and answers None, counting why in ``dropped``, for a serial
that is unknown, already completed or expired, or returned by another fetcher: this is how a re-delivered
or duplicated batch never stores a page twice. The last ``CLOSED_MEMORY`` closed serials are remembered
to tell "duplicate" or "expired" from "unknown". ``expire`` closes a batch that will not come back; the
caller re-queues its URLs; ``leased_by`` lists the batches whose lease started at or before a time, which
lease expiry walks. Pure data; not thread-safe.

May import: fetchers (records) and this room (dispatch).
"""

from __future__ import annotations

from collections import OrderedDict

from fetchers.records import Batch
from pipeline.dispatch import protocols as P

CLOSED_MEMORY = 200_000  # completed/expired serials remembered to tell "duplicate" from "unknown"


class BatchLedger:
    __slots__ = ("_out", "_since", "_closed", "dropped", "expired_total", "requeued_urls")

    def __init__(self) -> None:
        self._out: dict[int, Batch] = {}  # insertion order == issue order
        # When each batch out started its lease (issue or last renewal), oldest first: the caller's clock
        # never goes back, so a renewal moves the batch to the end and the order holds.
        self._since: OrderedDict[int, float] = OrderedDict()
        self._closed: OrderedDict[int, str] = OrderedDict()
        self.dropped: dict[str, int] = {}  # completions refused, by reason (protocols.DROP_*)
        self.expired_total = 0
        self.requeued_urls = 0  # the caller counts what it re-queues (expiries and unfinished URLs)

    def issue(self, batch: Batch) -> None:
        self._out[batch.serial] = batch
        self._since[batch.serial] = batch.issued_at

    def renew(self, serial: int, fetcher_id: str, now: float) -> bool:
        """Restart the lease of ``serial`` at ``now`` if it is out to ``fetcher_id``; False otherwise."""
        batch = self._out.get(serial)
        if batch is None or batch.fetcher_id != fetcher_id:
            return False
        self._since[serial] = max(now, self._since[serial])
        self._since.move_to_end(serial)
        return True

    def take(self, serial: int, fetcher_id: str) -> Batch | None:
        """Close ``serial`` as completed by ``fetcher_id``; None (counted in ``dropped``) if it is not out
        or belongs to another fetcher, and then nothing changes."""
        batch = self._out.get(serial)
        if batch is None:
            closed = self._closed.get(serial)
            self._drop(P.DROP_UNKNOWN if closed is None else closed)
            return None
        if batch.fetcher_id != fetcher_id:
            self._drop(P.DROP_WRONG_FETCHER)
            return None
        del self._out[serial]
        del self._since[serial]
        self._close(serial, P.DROP_DUPLICATE)
        return batch

    def expire(self, serial: int) -> Batch:
        """Close an outstanding batch that will not come back (a later completion counts as expired)."""
        batch = self._out.pop(serial)
        del self._since[serial]
        self._close(serial, P.DROP_EXPIRED)
        self.expired_total += 1
        return batch

    def leased_by(self, limit: float) -> list[int]:
        """Serials of the batches out whose lease started at or before ``limit``, oldest first."""
        late = []
        for serial, since in self._since.items():  # oldest first
            if since > limit:
                break
            late.append(serial)
        return late

    def batches(self) -> list[Batch]:
        """Batches issued and not yet completed or expired, oldest first."""
        return list(self._out.values())

    def urls(self) -> int:
        return sum(len(b.tasks) for b in self._out.values())

    def __len__(self) -> int:
        return len(self._out)

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def _close(self, serial: int, reason: str) -> None:
        self._closed[serial] = reason
        if len(self._closed) > CLOSED_MEMORY:
            self._closed.popitem(last=False)
