"""The frontier's refill reads on a thread of their own, so the caller's loop never waits on the store.

The fleet dispatcher's loop used to read each drained host's pending rows from HBase itself (a scan and
a multi-get per host, a few Thrift round trips each): in a py-spy profile of 2026-11-24 (the code before
6374fec; docs/bench/fleet.md) that was half of the loop's busy time, and while it ran no reply was taken and no batch went out. ``RefillReader`` takes the
hosts the frontier wants refilled (``ask``), reads them on one daemon thread with ``read`` (for HBase,
``HBaseStore.pending_many``: one scanner per host and one multi-get for all), and hands the records back
(``take``) to be applied on the caller's thread, the only one that touches the frontier.

Contract (the frontier's refill contract, kept across the hand-off):
- the caller asks only for hosts that are idle, empty and incomplete, after writing every outcome it
  holds (``CrawlCore._refill`` flushes first), so the rows read are the host's PENDING URLs; such a host
  cannot be leased before its read is applied (a lease needs a window, only a refill fills it);
- each request carries the host's ``HostState.epoch`` and the caller's ``done`` set of that moment;
  ``Frontier.refill(epoch=...)`` loads the rows but leaves the window incomplete when URLs joined the
  host in between (the next refill reads them);
- a host is asked for at most once at a time (``in_flight``), and stays wanted (``Frontier.wants_refill``)
  until its read is applied, so a crawl is never seen done with a read outstanding;
- a read that fails (after the store's own retries) is re-raised by ``take`` on the caller's thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pipeline.frontier.frontier import Frontier
from pipeline.storage.base import UrlRecord

Reader = Callable[[Sequence[str], int], Mapping[str, Sequence[UrlRecord]]]


class ReadOne(Protocol):
    """``Store.pending``'s shape, as a refill in line calls it."""

    def __call__(self, host: str, limit: int, *, refetches_only: bool = False) -> Sequence[UrlRecord]: ...


@dataclass(frozen=True, slots=True)
class Read:
    """One host's rows, with what the request knew when it was made."""

    host: str
    epoch: int
    records: Sequence[UrlRecord]
    done: Container[int]


@dataclass(frozen=True, slots=True)
class _Request:
    hosts: tuple[tuple[str, int], ...]  # (host, epoch)
    done: Container[int]


class RefillReader:
    """One reader thread; ``ask``/``take``/``close`` are called from one (the caller's) thread."""

    def __init__(self, read: Reader, *, limit: int) -> None:
        self._read = read
        self._limit = limit
        self.in_flight: dict[str, int] = {}  # host -> epoch of its outstanding request
        self._requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[list[Read] | BaseException] = queue.SimpleQueue()
        self.reads = 0  # reads made (each covers every host asked for since the last one)
        self._thread = threading.Thread(target=self._run, name="refill-reader", daemon=True)
        self._thread.start()

    def ask(self, hosts: Sequence[tuple[str, int]], *, done: Container[int]) -> None:
        """Read ``(host, epoch)`` pairs (none of them in flight) in the background."""
        if not hosts:
            return
        for host, epoch in hosts:
            self.in_flight[host] = epoch
        self._requests.put(_Request(tuple(hosts), done))

    def take(self) -> list[Read]:
        """Every read finished since the last call (without waiting); re-raises a failed read's error."""
        out: list[Read] = []
        while True:
            try:
                got = self._results.get_nowait()
            except queue.Empty:
                return out
            if isinstance(got, BaseException):
                raise got
            for r in got:
                self.in_flight.pop(r.host, None)
            out += got

    def close(self) -> None:
        self._requests.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            req = self._requests.get()
            if req is None:
                return
            # Requests queued meanwhile are read together: fewer, larger round trips.
            batch = [req]
            while True:
                try:
                    more = self._requests.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._requests.put(None)
                    break
                batch.append(more)
            try:
                hosts = [h for r in batch for h, _ in r.hosts]
                got = self._read(hosts, self._limit)
                self.reads += 1
                self._results.put(
                    [Read(h, e, list(got.get(h, ())), r.done) for r in batch for h, e in r.hosts]
                )
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
                self._results.put(exc)
                return


class Refills:
    """How ``CrawlCore`` refills its frontier: in line, one ``read_one(host, limit)`` per host on the
    caller's thread (the embedded crawl, SQLite, a re-crawl that notes validators), or through a
    ``RefillReader`` over ``read_many`` when one is given (the fleet dispatcher on HBase). A read in
    line asks for re-fetches only where the frontier says so (``Frontier.refetches_only``: a capped host
    of a re-crawl); the background reader never has to, as a re-crawl reads in line.

    ``run`` applies the reads that finished, then asks for the hosts still wanted; ``flush`` writes the
    caller's buffered outcomes and ``done_ids`` names those still on a writer's queue (see the module
    docstring and ``CrawlCore._refill``)."""

    def __init__(
        self,
        frontier: Frontier,
        read_one: ReadOne,
        *,
        read_many: Reader | None = None,
        hosts_per_read: int = 64,
    ) -> None:
        self.frontier = frontier
        self._read_one = read_one
        self._limit = frontier.limits.window_per_host + 1
        self._hosts_per_read = hosts_per_read
        self.reader = RefillReader(read_many, limit=self._limit) if read_many is not None else None
        self.counts = [0, 0]  # host reads: [all fitted the window, more than it]

    @property
    def in_flight(self) -> int:
        return len(self.reader.in_flight) if self.reader is not None else 0

    def run(self, *, flush: Callable[[], None], done_ids: Callable[[], Container[int]]) -> None:
        window = self.frontier.limits.window_per_host
        if self.reader is None:
            wanted = self.frontier.wants_refill(self._hosts_per_read)
            if not wanted:
                return
            flush()  # a released host's finished URLs must be DONE in the store before its rows are read
            done = done_ids()  # taken before the reads (see WriteBehind.unapplied_ids)
            for host in wanted:
                records = self._read_one(host, self._limit, refetches_only=self.frontier.refetches_only(host))
                self.counts[len(records) > window] += 1
                self.frontier.refill(host, records, done=done)
            return
        for r in self.reader.take():
            self.counts[len(r.records) > window] += 1
            self.frontier.refill(r.host, r.records, done=r.done, epoch=r.epoch)
        wanted = self.frontier.wants_refill(self._hosts_per_read, skip=self.reader.in_flight)
        if wanted:
            flush()
            done = done_ids()
            self.reader.ask([(h, self._epoch(h)) for h in wanted], done=done)

    def _epoch(self, host: str) -> int:
        hs = self.frontier.host(host)
        return hs.epoch if hs is not None else 0

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
