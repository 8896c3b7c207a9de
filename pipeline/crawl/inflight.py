"""The crawl core's batches in flight: which URLs each batch holds, which have a final result, how many
URLs are out, and how often a URL came back "retry later".

Contract: ``open`` a batch when it is issued; ``owning(result)`` names the batch a result belongs to
(None for an unknown serial or a URL the batch does not hold: the caller drops it); ``settle`` marks a
URL answered, so that an expired batch's re-queue (``pipeline.frontier.answered.AnsweredFilter`` reads
``answered``) never brings it back; ``retry_later`` counts a not-final result and says when it must be
taken as final after all (more than ``MAX_RETRY_LATER``, so an unreachable host cannot keep a crawl
from ending); ``close`` ends a batch its fetcher returned; ``keep_only`` forgets the batches the
dispatcher expired. ``issued`` counts URLs out and not given back (what the page limit compares with).
Pure data; one thread.

May import: fetchers (records).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from fetchers.records import Batch, FetchResult

# A retry-later result (pipeline.crawl.outcome.NOT_FINAL) hands its URL back to be tried again after a
# back-off. After MAX_RETRY_LATER such results a URL is recorded as FAILED, so a host that stays
# unreachable (robots 5xx, DNS outage) cannot keep the crawl from ending.
MAX_RETRY_LATER = 5


@dataclass(slots=True)
class Flight:
    batch: Batch
    urls: frozenset[int]
    answered: set[int]


class InFlight:
    __slots__ = ("answered", "issued", "_flights", "_retry_later")

    def __init__(self) -> None:
        self.answered: set[int] = set()  # url_ids with a result, among in-flight batches
        self.issued = 0
        self._flights: dict[int, Flight] = {}
        self._retry_later: dict[int, int] = {}  # url_id -> retry-later results so far

    def open(self, batch: Batch) -> None:
        self.issued += len(batch.tasks)
        self._flights[batch.serial] = Flight(batch, frozenset(t.url_id for t in batch.tasks), set())

    def get(self, serial: int) -> Flight | None:
        return self._flights.get(serial)

    def owning(self, result: FetchResult) -> Flight | None:
        """The batch in flight that holds ``result``'s URL, or None."""
        flight = self._flights.get(result.serial)
        return None if flight is None or result.url_id not in flight.urls else flight

    def settle(self, flight: Flight, url_id: int) -> None:
        """``url_id`` has its final result: the batch's re-queue must not bring it back."""
        self._retry_later.pop(url_id, None)
        flight.answered.add(url_id)
        self.answered.add(url_id)

    def retry_later(self, url_id: int) -> bool:
        """Count one more retry-later result of ``url_id``; True when it is now to be taken as final."""
        tries = self._retry_later.get(url_id, 0) + 1
        self._retry_later[url_id] = tries
        return tries > MAX_RETRY_LATER

    def close(self, serial: int, *, given_back: int) -> None:
        """Batch ``serial`` came back; ``given_back`` of its URLs were re-queued (0 when the dispatcher
        refused the completion)."""
        self.issued -= given_back
        flight = self._flights.pop(serial, None)
        if flight is not None:
            self.answered.difference_update(flight.answered)

    def keep_only(self, live: Container[int]) -> set[int]:
        """Forget every batch whose serial is not in ``live`` (expired by death, lease or restart); returns
        the URL ids they held without a result (the dispatcher has re-queued those)."""
        unanswered: set[int] = set()
        for serial in [s for s in self._flights if s not in live]:
            gone = self._flights.pop(serial)
            self.issued -= len(gone.urls) - len(gone.answered)
            unanswered |= gone.urls - gone.answered
            self.answered.difference_update(gone.answered)
        return unanswered

    def __len__(self) -> int:
        return len(self._flights)
