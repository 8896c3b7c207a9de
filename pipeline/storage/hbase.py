"""The HBase store: crawl database, pending set, page store and serial ids over Thrift1 (happybase).

Tables (``{prefix}_NAME``), each designed for one access path:

- ``crawldb``  key = reversed URL (``rowkey.row_key``), family ``m``: one row per known URL. A site
  is one contiguous key range; ``seen``/``add_urls`` are one multi-get (``getRowsWithColumns``).
  In-links: ``hbase_inlinks`` (blind per-round cells in family ``n`` for link-jobs rounds, else
  read-then-put of ``m:n``), exact while one writer at a time adds links to a URL.
- ``pending``  key = ``authority_key(host) | depth (2 bytes, big-endian) | row_key(url)``, family
  ``p``: ``pending(host)`` is one prefix scan, already shallowest first then in URL order.
- ``pages``    key = reversed URL, family ``m`` (fetch metadata) and family ``b`` (the body), so that
  metadata scans never read bodies.
- ``meta``     rows ``k:<key>`` (family ``m``), ``serials`` (counter ``m:next``) and ``counts``
  (family ``c``: one counter per state name and ``pages``).

Contracts beyond :class:`~pipeline.storage.base.Store`:

- Every Thrift round trip is retried (tenacity, with a fresh connection from the pool) on transport
  and server errors for up to ``retry_seconds``, so a restart of the Thrift server or HBase loses no
  write. Puts and deletes are idempotent, so a retried batch is harmless.
- Write order keeps every crash state safe: a pending row is written before its crawl-db row (a
  URL is never known without being pending or done), a page before the state that says DONE, and a
  pending row is deleted last; ``pending`` skips (and removes) pending rows whose URL is no longer
  PENDING.
- ``counts`` comes from counters maintained by increments. An increment whose reply is lost in a
  connection failure may be applied twice on retry, so after faults the counters can drift;
  ``recount()`` rebuilds them exactly by scanning, and a resumed crawl or dispatcher calls it
  (``reconcile_counts``) before ``--max-pages`` or its summary reads them.
- Exactly-once in ``record_results`` assumes one writer per URL at a time: the dispatcher, or on the
  design card's loop the node holding the URL's batch. A batch re-issued while its first holder still
  runs can make two nodes record the same URL at once: the page is the same row either way, but the
  state counters may then count it twice (``recount()`` fixes them).
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

import happybase
from Hbase_thrift import AlreadyExists, IllegalArgument, TIncrement
from tenacity import Retrying, before_sleep_log, retry_if_exception, stop_after_delay, wait_exponential_jitter
from thriftpy2.thrift import TException

from pipeline.storage import hbase_hostcounts, hbase_inlinks, hbase_meta, hbase_pending, hbase_revisits
from pipeline.storage.base import Outcome, PageRecord, Revisit, Store, UrlRecord, UrlState
from pipeline.storage.hbase_cells import (
    _D,
    _I,
    FAMILIES,
    INLINKS,
    LEGACY,
    LINK_ROUND,
    REFILL_COLS,
    URL_COLS,
    _long,
    due_key,
    page_cells,
    page_record,
    pending_key,
    revisit_cell,
    url_cells,
    url_record,
)
from pipeline.storage.rowkey import authority_key, row_key
from pipeline.urls import fingerprint

log = logging.getLogger(__name__)
T = TypeVar("T")

_STATE_NAMES = {s: s.name.lower() for s in UrlState}


def _transient(exc: BaseException) -> bool:
    """Transport failures, dropped sockets and HBase IOErrors are retried; bad requests are not."""
    if isinstance(exc, IllegalArgument | AlreadyExists):
        return False
    return isinstance(exc, TException | OSError | EOFError)


class HBaseStore(Store):
    """HBase implementation of :class:`Store` (see the module docstring for its contracts)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9090,
        *,
        prefix: str = "crawlfleet",
        batch_size: int = 200,
        pool_size: int = 2,
        timeout_ms: int = 60_000,
        retry_seconds: float = 180.0,
    ) -> None:
        self.prefix = prefix
        self.batch_size = batch_size
        self._retry_seconds = retry_seconds
        self._pool = happybase.ConnectionPool(
            pool_size, host=host, port=port, table_prefix=prefix, timeout=timeout_ms, autoconnect=False
        )
        self._names = {name: f"{prefix}_{name}".encode() for name in FAMILIES}
        self._link_round = b""  # set_link_round
        self._ensure_tables()
        # A crawl db made before family n (blind in-link cells) keeps read-then-put counts; Thrift1 cannot
        # add a family to a table.
        families = self._call(lambda c: c.table("crawldb").families())
        self._blind_ok = INLINKS in families
        self.url_cols = URL_COLS if self._blind_ok else [c for c in URL_COLS if c not in LEGACY]
        self.refill_cols = REFILL_COLS if self._blind_ok else [c for c in REFILL_COLS if c not in LEGACY]

    # --- plumbing --------------------------------------------------------------------------------
    def _call(self, fn: Callable[[happybase.Connection], T]) -> T:
        """Run one round trip, retrying on a fresh pooled connection while the error is transient."""
        retrying = Retrying(
            retry=retry_if_exception(_transient),
            stop=stop_after_delay(self._retry_seconds),
            wait=wait_exponential_jitter(initial=0.05, max=2.0),
            before_sleep=before_sleep_log(log, logging.WARNING),
            reraise=True,
        )
        for attempt in retrying:
            with attempt, self._pool.connection() as conn:
                return fn(conn)
        raise AssertionError("unreachable")  # pragma: no cover - Retrying either returns or raises

    def _ensure_tables(self) -> None:
        existing = set(self._call(lambda c: c.tables()))
        for name, families in FAMILIES.items():
            if name.encode() in existing:
                continue
            with contextlib.suppress(AlreadyExists):  # another process created it first
                self._call(lambda c, n=name, f=families: c.create_table(n, f))  # type: ignore[misc]

    def _put(self, table: str, rows: Iterable[tuple[bytes, dict[bytes, bytes]]]) -> None:
        items = list(rows)
        if not items:
            return

        def send(conn: happybase.Connection) -> None:
            with conn.table(table).batch(batch_size=self.batch_size) as batch:
                for key, data in items:
                    batch.put(key, data)

        self._call(send)

    def _delete(self, table: str, keys: Sequence[bytes]) -> None:
        if not keys:
            return

        def send(conn: happybase.Connection) -> None:
            with conn.table(table).batch(batch_size=self.batch_size) as batch:
                for key in keys:
                    batch.delete(key)

        self._call(send)

    def _rows(self, table: str, keys: Sequence[bytes], columns: list[bytes] | None = None) -> dict[bytes, dict]:  # type: ignore[type-arg]
        if not keys:
            return {}
        return dict(self._call(lambda c: c.table(table).rows(list(keys), columns=columns)))

    def _increment(self, incs: Iterable[tuple[str, bytes, bytes, int]]) -> None:
        """Apply ``(table, row, column, amount)`` increments in one ``incrementRows`` round trip."""
        batch = [TIncrement(table=self._names[t], row=r, column=col, ammount=n) for t, r, col, n in incs if n]
        if batch:
            self._call(lambda c: c.client.incrementRows(batch))

    # --- crawl database and seen-set -------------------------------------------------------------
    def add_urls(self, records: Sequence[UrlRecord], *, count_inlinks: bool = True) -> list[UrlRecord]:
        batch: dict[bytes, UrlRecord] = {}
        for rec in records:
            key = row_key(rec.url)
            if key not in batch:  # duplicates inside the call count once
                batch[key] = rec if rec.url_id else replace(rec, url_id=fingerprint(rec.url))
        if not batch:
            return []
        tag = self._link_round if count_inlinks else b""
        blind = self.blind_inlinks and count_inlinks
        cols = [b"m:s", b"m:n", LINK_ROUND] if count_inlinks and not blind else [b"m:s"]
        known = self._rows("crawldb", list(batch), cols)
        new = [
            rec if rec.state == UrlState.PENDING else replace(rec, state=UrlState.PENDING)
            for key, rec in batch.items()
            if key not in known
        ]
        # Pending rows first: a crash in between leaves a pending row without a crawl-db row (skipped
        # by pending(), re-added on rediscovery), never a known URL that is not pending. Sitemap files go
        # in the refetch index too: a capped host still takes them (pending(refetches_only=True)).
        self._put("refetch", ((authority_key(r.host) + b"|" + row_key(r.url), {b"r:x": b""}) for r in new if r.infra))
        self._put("pending", ((pending_key(r.host, r.depth, row_key(r.url)), {b"p:x": b""}) for r in new))
        self._put("crawldb", ((row_key(r.url), url_cells(r, link_round=tag, blind=blind)) for r in new))
        if count_inlinks and known:  # see hbase_inlinks for the two ways
            counts = {key: max(1, batch[key].inlinks) for key in known}
            if blind:
                hbase_inlinks.raise_blind(self, counts, tag)
            else:
                hbase_inlinks.raise_read(self, known, counts, tag)
        self._increment([("meta", b"counts", b"c:pending", len(new))])
        return new

    @property
    def blind_inlinks(self) -> bool:
        """True while a link-jobs round tags the counts and the crawl db has family n: ``raise_inlinks``
        then writes without reading (``hbase_inlinks``)."""
        return self._blind_ok and hbase_inlinks.ordered(self._link_round)

    def raise_inlinks(self, records: Sequence[UrlRecord]) -> None:
        if not self.blind_inlinks:
            self.add_urls(records, count_inlinks=True)
            return
        hbase_inlinks.raise_blind(self, hbase_inlinks.counts_of(records), self._link_round)

    def set_link_round(self, round_id: str) -> None:
        """Tag later ``add_urls`` in-link counts with a link-jobs round (``m:L``): one round counts a URL once."""
        self._link_round = round_id.encode()

    def seen(self, urls: Sequence[str]) -> set[str]:
        by_key = {row_key(u): u for u in urls}
        return {by_key[k] for k in self._rows("crawldb", list(by_key), [b"m:s"])}

    def get_url(self, url: str) -> UrlRecord | None:
        row = self._call(lambda c: c.table("crawldb").row(row_key(url), columns=self.url_cols))
        return url_record(row) if row else None

    def get_urls(self, urls: Sequence[str]) -> dict[str, UrlRecord]:
        keys = {row_key(u): u for u in dict.fromkeys(urls)}
        rows = self._rows("crawldb", list(keys), columns=self.url_cols)
        return {keys[k]: url_record(row) for k, row in rows.items() if row and k in keys}

    # --- pending set -----------------------------------------------------------------------------
    def pending(
        self, host: str, limit: int, *, after: tuple[int, str] | None = None, refetches_only: bool = False
    ) -> list[UrlRecord]:
        if refetches_only:
            return hbase_revisits.pending_refetches(self, host, limit)
        return hbase_pending.pending_one(self, host, limit, after=after)

    def pending_many(self, hosts: Sequence[str], limit: int) -> dict[str, list[UrlRecord]]:
        """``pending(host, limit)`` for several hosts in three pipelined round trips, for the frontier's
        refills (the fleet dispatcher's reader thread): see ``hbase_pending.pending_many``."""
        return hbase_pending.pending_many(self, hosts, limit)

    def pending_hosts(self, limit: int = 1_000_000) -> list[tuple[str, int]]:
        return hbase_hostcounts.pending_hosts(self._call, limit)

    def taken_per_host(self) -> dict[str, int]:
        return hbase_hostcounts.taken_per_host(self._call)

    # --- results ---------------------------------------------------------------------------------
    def record_results(self, outcomes: Sequence[Outcome]) -> int:
        batch: dict[bytes, Outcome] = {}
        for out in outcomes:
            batch.setdefault(row_key(out.url), out)  # a replay inside one call counts once
        if not batch:
            return 0
        rows = self._rows("crawldb", list(batch), [b"m:s", b"m:d", b"m:h", b"m:i"])
        live = [k for k, row in rows.items() if row[b"m:s"][0] == UrlState.PENDING]
        if not live:
            return 0
        states: Counter[str] = Counter()
        pages, updates, done = [], [], []
        due: list[tuple[bytes, dict[bytes, bytes]]] = []
        again: list[bytes] = []  # re-fetches with a new page: the page row may exist already
        for key in live:
            out, row = batch[key], rows[key]
            uid = _long(row[b"m:i"]) or out.url_id or fingerprint(out.url)
            updates.append((key, {
                b"m:s": bytes([out.state]), b"m:c": _I.pack(out.status), b"m:t": _D.pack(out.fetched_at),
                b"m:g": out.signature.encode(), b"m:e": out.error.encode(), b"m:r": _I.pack(out.retries),
            }))  # fmt: skip
            if out.revisit is not None:
                updates[-1][1][b"m:R"] = revisit_cell(out.revisit)
                due.append((due_key(out.revisit.next_fetch, key), {b"d:x": b""}))
                if out.page is not None and out.revisit.fetches > 1:
                    again.append(key)
            if out.page is not None:
                pages.append((key, page_cells(out.page, uid)))
            if out.state != UrlState.PENDING:
                done.append(pending_key(row[b"m:h"].decode(), _I.unpack(row[b"m:d"])[0], key))
                states["pending"] -= 1
                states[_STATE_NAMES[UrlState(out.state)]] += 1
        states["pages"] += len(pages) - (len(self._rows("pages", again, [b"m:u"])) if again else 0)
        self._put("pages", pages)  # pages before the states that point at them
        self._put("due", due)  # the due entry before the state: a URL done and scheduled is always found
        self._put("crawldb", updates)
        self._delete("pending", done)
        self._increment(("meta", b"counts", f"c:{name}".encode(), n) for name, n in states.items())
        return len(live)

    # --- re-crawling (pipeline/storage/hbase_revisits.py) ------------------------------------------
    def requeue_due(self, now: float, limit: int, *, hosts: Mapping[str, int] | None = None) -> dict[str, int]:
        return hbase_revisits.requeue_due(self, now, limit, hosts=hosts)

    def get_revisit(self, url: str) -> Revisit | None:
        return hbase_revisits.get_revisit(self, url)

    def put_revisits(self, items: Sequence[tuple[str, Revisit]]) -> int:
        return hbase_revisits.put_revisits(self, items)

    def get_page(self, url: str) -> PageRecord | None:
        row = self._call(lambda c: c.table("pages").row(row_key(url)))
        return page_record(row) if row else None

    def iter_pages(self) -> Iterator[PageRecord]:
        """Pages in row-key order; a broken scan resumes after the last row it delivered."""
        start = b""
        while True:
            chunk = self._call(lambda c, s=start: list(c.table("pages").scan(row_start=s, limit=64, batch_size=64)))  # type: ignore[misc]
            yield from (page_record(row) for _, row in chunk)
            if len(chunk) < 64:
                return
            start = chunk[-1][0] + b"\x00"

    def counts(self) -> dict[str, int]:
        row = self._call(lambda c: c.table("meta").row(b"counts", columns=[b"c"]))
        out = {name: 0 for name in [*_STATE_NAMES.values(), "pages"]}
        out.update({k[2:].decode(): _long(v) for k, v in row.items()})
        return out

    def reconcile_counts(self) -> None:
        self.recount()

    def recount(self) -> dict[str, int]:
        """Rebuild the ``counts`` counters exactly by scanning crawldb and pages (after faults)."""
        states: Counter[str] = Counter({name: 0 for name in _STATE_NAMES.values()})

        def scan(conn: happybase.Connection) -> int:
            for _, row in conn.table("crawldb").scan(columns=[b"m:s"], batch_size=5000):
                states[_STATE_NAMES[UrlState(row[b"m:s"][0])]] += 1
            return sum(1 for _ in conn.table("pages").scan(columns=[b"m:c"], batch_size=5000))

        states["pages"] = self._call(scan)
        current = self.counts()
        self._increment(
            ("meta", b"counts", f"c:{k}".encode(), n - current.get(k, 0)) for k, n in states.items()
        )
        return dict(states)

    # --- serial ids and metadata -----------------------------------------------------------------
    def reserve_serials(self, n: int) -> range:
        if n < 0:
            raise ValueError("n must be >= 0")
        end = self._call(lambda c: c.table("meta").counter_inc(b"serials", b"m:next", n))
        return range(end - n + 1, end + 1)

    def get_meta(self, key: str) -> str | None:
        row = self._call(lambda c: c.table("meta").row(b"k:" + key.encode(), columns=[b"m:v"]))
        return row[b"m:v"].decode() if row else None

    def put_meta(self, key: str, value: str) -> None:
        self._call(lambda c: c.table("meta").put(b"k:" + key.encode(), {b"m:v": value.encode()}))

    def swap_meta(self, key: str, expected: str | None, new: str) -> bool:
        return hbase_meta.swap(self, key, expected, new)

    def scan_meta(self, prefix: str) -> Iterator[tuple[str, str]]:
        return hbase_meta.scan(self, prefix)

    def delete_meta(self, keys: Sequence[str]) -> None:
        hbase_meta.delete(self, keys)

    def drop(self) -> None:
        """Delete this prefix's tables (tests, benchmarks)."""
        for name in FAMILIES:
            self._call(lambda c, n=name: c.delete_table(n, disable=True) if n.encode() in c.tables() else None)  # type: ignore[misc]

    def close(self) -> None:
        # ConnectionPool has no close(); drain it and close each connection.
        while True:
            try:
                conn = self._pool._queue.get_nowait()
            except Exception:  # queue.Empty
                return
            conn.close()
