"""Write-behind: the store's result writes on a thread of their own, in submission order.

Why: in the embedded crawl one core runs everything under the GIL, and applying a flush of outcomes
(SQLite statements and the body log's ``writev``) is mostly work that releases the GIL. On a thread
it overlaps the next pages' fetching and parsing, on the machine's other core.

Contracts:
- Jobs are applied one at a time, in the order ``submit`` was called. A job's outcomes are applied
  before its checkpoint is written, so the journal checkpoint never passes an unapplied result (a kill
  at any moment replays them, exactly as with synchronous writes).
- ``LockedStore`` serialises every call on the store, from any thread, so the writer's transaction
  never interleaves with the caller's reads and writes on the same connection.
- ``unapplied_ids`` lists the URLs with a submitted, not yet applied final outcome: a caller that reads
  PENDING rows (a frontier refill) must drop those, since the store still shows them PENDING.
- A failure on the writer thread is re-raised to the caller by the next ``submit``, ``drain`` or
  ``close``; the writer applies nothing after it (the journal still has every result).
- At most ``max_jobs`` jobs wait, so memory stays bounded: ``submit`` blocks while the queue is full.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from pipeline.storage.base import Outcome, PageRecord, Revisit, Store, UrlRecord


class LockedStore(Store):
    """``inner`` behind one lock: usable from the crawl's thread and the write-behind thread."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.lock = threading.Lock()

    def add_urls(self, records: Sequence[UrlRecord], *, count_inlinks: bool = True) -> list[UrlRecord]:
        with self.lock:
            return self.inner.add_urls(records, count_inlinks=count_inlinks)

    def seen(self, urls: Sequence[str]) -> set[str]:
        with self.lock:
            return self.inner.seen(urls)

    def get_url(self, url: str) -> UrlRecord | None:
        with self.lock:
            return self.inner.get_url(url)

    def iter_url_ids(self) -> Iterator[int]:
        """Holds the lock until exhausted or closed (streamed: the id list can be millions long)."""
        with self.lock:
            yield from self.inner.iter_url_ids()

    def pending(
        self, host: str, limit: int, *, after: tuple[int, str] | None = None, refetches_only: bool = False
    ) -> list[UrlRecord]:
        with self.lock:
            return self.inner.pending(host, limit, after=after, refetches_only=refetches_only)

    def pending_hosts(self, limit: int = 1_000_000) -> list[tuple[str, int]]:
        with self.lock:
            return self.inner.pending_hosts(limit)

    def taken_per_host(self) -> dict[str, int]:
        with self.lock:
            return self.inner.taken_per_host()

    def reconcile_counts(self) -> None:
        with self.lock:
            self.inner.reconcile_counts()

    def record_results(self, outcomes: Sequence[Outcome]) -> int:
        with self.lock:
            return self.inner.record_results(outcomes)

    def get_page(self, url: str) -> PageRecord | None:
        with self.lock:
            return self.inner.get_page(url)

    def iter_pages(self) -> Iterator[PageRecord]:
        """Holds the lock until exhausted or closed."""
        with self.lock:
            yield from self.inner.iter_pages()

    def requeue_due(self, now: float, limit: int, *, hosts: Mapping[str, int] | None = None) -> dict[str, int]:
        with self.lock:
            return self.inner.requeue_due(now, limit, hosts=hosts)

    def get_revisit(self, url: str) -> Revisit | None:
        with self.lock:
            return self.inner.get_revisit(url)

    def put_revisits(self, items: Sequence[tuple[str, Revisit]]) -> int:
        with self.lock:
            return self.inner.put_revisits(items)

    def counts(self) -> dict[str, int]:
        with self.lock:
            return self.inner.counts()

    def reserve_serials(self, n: int) -> range:
        with self.lock:
            return self.inner.reserve_serials(n)

    def get_meta(self, key: str) -> str | None:
        with self.lock:
            return self.inner.get_meta(key)

    def put_meta(self, key: str, value: str) -> None:
        with self.lock:
            self.inner.put_meta(key, value)

    def swap_meta(self, key: str, expected: str | None, new: str) -> bool:
        with self.lock:
            return self.inner.swap_meta(key, expected, new)

    def scan_meta(self, prefix: str) -> Iterator[tuple[str, str]]:
        with self.lock:
            return iter(list(self.inner.scan_meta(prefix)))

    def delete_meta(self, keys: Sequence[str]) -> None:
        with self.lock:
            self.inner.delete_meta(keys)

    def flush(self) -> None:
        with self.lock:
            self.inner.flush()

    def close(self) -> None:
        with self.lock:
            self.inner.close()


@dataclass(frozen=True, slots=True)
class WriteJob:
    """Outcomes to apply, then (when not empty) the journal checkpoint they complete."""

    outcomes: Sequence[Outcome]
    checkpoint: str = ""
    before: Callable[[Sequence[Outcome]], None] | None = None  # e.g. live WARC output, on the writer


class WriteBehind:
    """One writer thread applying ``WriteJob``s to ``store`` (see the module docstring)."""

    def __init__(
        self, store: Store, *, max_jobs: int = 4, checkpoint_key: str = "journal_checkpoint"
    ) -> None:
        self.store = store
        self.max_jobs = max(1, max_jobs)
        self.checkpoint_key = checkpoint_key
        self._cond = threading.Condition()
        self._queue: deque[tuple[int, WriteJob]] = deque()
        self._submitted = 0  # sequence number of the last submitted job
        self._applied = 0  # ... of the last applied one (written by the thread, under _cond)
        self._error: BaseException | None = None
        self._closing = False
        # Caller-side: (seq, url ids) of jobs not known to be applied, oldest first. Only the
        # caller's thread touches these two.
        self._ids_by_job: deque[tuple[int, list[int]]] = deque()
        self._unapplied: set[int] = set()
        self._thread = threading.Thread(target=self._run, name="crawlfleet-write-behind", daemon=True)
        self._thread.start()

    # --- caller side ---------------------------------------------------------------------------------
    def submit(self, job: WriteJob) -> None:
        """Queue ``job``; blocks while ``max_jobs`` jobs wait. Raises the writer's failure, if any."""
        ids = [o.url_id for o in job.outcomes]
        with self._cond:
            while len(self._queue) >= self.max_jobs and self._error is None:
                self._cond.wait()
            self._raise_error()
            self._submitted += 1
            self._queue.append((self._submitted, job))
            self._cond.notify_all()
        if ids:
            self._ids_by_job.append((self._submitted, ids))
            self._unapplied.update(ids)

    def unapplied_ids(self) -> set[int]:
        """URL ids whose submitted outcome may not be in the store yet (a superset; see the contract).

        Read it *before* reading PENDING rows: an id that leaves it afterwards was applied after the
        read began, and the rows read may still show it PENDING.
        """
        with self._cond:
            applied = self._applied
        while self._ids_by_job and self._ids_by_job[0][0] <= applied:
            _, ids = self._ids_by_job.popleft()
            self._unapplied.difference_update(ids)
        return self._unapplied

    def drain(self) -> None:
        """Wait until every submitted job is applied. Raises the writer's failure, if any."""
        with self._cond:
            while self._applied < self._submitted and self._error is None:
                self._cond.wait()
            self._raise_error()
        self.unapplied_ids()

    def close(self) -> None:
        """Apply what is queued, stop the thread. Raises the writer's failure, if any."""
        try:
            self.drain()
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
            self._thread.join()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"write-behind failed: {self._error!r}") from self._error

    # --- writer thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                seq, job = self._queue[0]
            try:
                if job.outcomes:
                    if job.before is not None:
                        job.before(job.outcomes)
                    self.store.record_results(job.outcomes)
                if job.checkpoint:
                    self.store.put_meta(self.checkpoint_key, job.checkpoint)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, never lost
                with self._cond:
                    self._error = exc
                    self._queue.clear()
                    self._cond.notify_all()
                return
            with self._cond:
                self._queue.popleft()
                self._applied = seq
                self._cond.notify_all()
