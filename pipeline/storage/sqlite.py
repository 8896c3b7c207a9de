"""The embedded store: crawl database, pending set, page store and serial ids in one SQLite file.

Contracts beyond :class:`~pipeline.storage.base.Store`:

- Identity is the 64-bit fingerprint (``pipeline.urls.fingerprint``). A record's ``url_id`` is
  trusted when non-zero (callers compute it once), otherwise computed here. Two URLs with the same
  fingerprint are one URL to this store.
- Every public method is one explicit transaction, committed before it returns. WAL with
  ``synchronous=NORMAL`` makes a committed transaction survive a kill of the process (not
  necessarily a power cut; :meth:`flush` checkpoints for that).
- Multi-URL methods cost one statement batch per 500 URLs, never one round trip per URL.
- ``counts()`` and ``pending_hosts()`` read small tables kept up to date inside the same
  transactions as the changes they count, so they stay cheap at any crawl size.
- One connection does all reads and writes, used by one thread at a time (any thread:
  ``check_same_thread`` is off). A second, private connection only checkpoints the WAL from a
  background thread, so the copy into the main file and its fsync stay off the crawl's hot path
  (measured: inline auto-checkpoints made ``record_results`` 3-5x slower in wall time).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random

from pipeline.storage import sqlite_revisits
from pipeline.storage.base import Outcome, PageRecord, Revisit, Store, UrlRecord, UrlState
from pipeline.storage.bodies import BodyLog
from pipeline.storage.sqlite_schema import (  # noqa: F401 (CHUNK, SCHEMA_VERSION are public here too)
    _BUMP_COUNTER,
    _BUMP_HOST,
    _INSERT_HOPS,
    _INSERT_LINK_META,
    _INSERT_PAGE,
    _INSERT_URL,
    _PAGE_COLS,
    _SCHEMA,
    _SELECT_PENDING,
    _SELECT_PENDING_AFTER,
    _SELECT_PENDING_HOSTS,
    _SELECT_TAKEN,
    _SELECT_URL,
    _STATE_NAMES,
    _UPSERT_REVISIT,
    CHUNK,
    CODEC_LZ4,
    CODEC_RAW,
    CODEC_ZLIB,
    SCHEMA_VERSION,
    _chunks,
    _marks,
    _upsert_seen,
    _url_record,
    encode_body,
    page_record,
    page_row,
    revisit_row,
    url_row,
)
from pipeline.storage.sqlite_tx import BUSY_TIMEOUT_S, LINK_ROUNDS_DDL, Transaction, claim_round, is_locked
from pipeline.storage.sqlite_wal import Checkpointer, tidy_on_close
from pipeline.urls import fingerprint


class SqliteStore(Store):
    """SQLite implementation of :class:`Store` (see the module docstring for its contracts).

    Page bodies live in append-only segment files in ``<path>.bodies/`` (see ``bodies.py`` for why);
    the ``pages`` table holds their metadata and ``(segment, offset, length)``.

    ``compress_level`` is the zlib level for page bodies; 0 (the default) stores them as they are.
    Why not compressed by default: zlib level 1 measured 100-400 us per 20 KB page on our 2-core
    machines, several times the whole store's per-page budget on the crawl's hot path. Each row
    records its codec, so files written with either setting read the same.
    """

    def __init__(
        self, path: str | Path, *, compress_level: int = 0, checkpoint_interval: float = 1.0
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._level = compress_level
        # isolation_level=None: no implicit transactions; every method says BEGIN/COMMIT itself.
        # timeout= sets the busy handler before the first PRAGMA: switching to WAL takes a lock, and a
        # second opener (two Spark tasks of one job) must wait for it rather than fail at once.
        self._db = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_S
        )
        # Openers that race on a new file can still get "database is locked" at once: SQLite skips the
        # busy handler where waiting could deadlock (a shared lock that must grow while another opener
        # holds the pending lock, as when one switches the file to WAL). Every set-up step is
        # idempotent, so it is simply run again.
        for attempt in Retrying(
            retry=retry_if_exception(is_locked),
            wait=wait_random(0.01, 0.1),
            stop=stop_after_delay(10.0),
            reraise=True,
        ):
            with attempt:
                self._set_up()
        found = self.get_meta("schema_version")
        if found != SCHEMA_VERSION:  # other fingerprints: resuming would refetch and mis-dedup
            self._db.close()
            raise ValueError(
                f"{self.path}: crawl database schema {found}, this crawlfleet needs {SCHEMA_VERSION}"
            )
        self._closed = False
        self._link_round = ""  # set_link_round
        self._bodies = BodyLog(self.path.with_name(self.path.name + ".bodies"))
        self._checkpointer = Checkpointer(self.path, checkpoint_interval) if checkpoint_interval > 0 else None

    def _set_up(self) -> None:
        """Pragmas, schema and the fixed rows; idempotent."""
        if self._db.in_transaction:  # a failed attempt's DDL transaction
            self._db.execute("ROLLBACK")
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            "temp_store=MEMORY",
            "cache_size=-65536",  # 64 MiB page cache: the pending index and hot url rows stay resident
            f"busy_timeout={int(BUSY_TIMEOUT_S * 1000)}",
            # The background checkpointer keeps the WAL short; this is only the backstop (64 MiB).
            "wal_autocheckpoint=16384",
            "journal_size_limit=67108864",
        ):
            self._db.execute(f"PRAGMA {pragma}")
        # executescript commits any open transaction first, so the DDL runs in its own.
        self._db.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")
        with self._tx():
            self._db.execute("INSERT OR IGNORE INTO serials (id, next) VALUES (0, 1)")
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
            )
            self._db.executemany(
                "INSERT OR IGNORE INTO counters (name, n) VALUES (?, 0)",
                [(name,) for name in [*_STATE_NAMES.values(), "pages"]],
            )

    # --- transactions ----------------------------------------------------------------------------
    def _tx(self) -> Transaction:
        return Transaction(self._db)

    def _select_in(self, sql: str, ids: Sequence[int]) -> list[tuple]:  # type: ignore[type-arg]
        """Rows of ``sql`` (with one ``{in}`` placeholder for the id list) for all ``ids``, 500 a statement."""
        rows: list[tuple] = []  # type: ignore[type-arg]
        for chunk in _chunks(ids):
            rows.extend(self._db.execute(sql.format(marks=_marks(len(chunk))), chunk))
        return rows

    def _bump(self, hosts: Mapping[str, int], states: Mapping[str, int]) -> None:
        """Apply per-host pending deltas and per-counter deltas (zero deltas are skipped)."""
        if hosts:
            self._db.executemany(_BUMP_HOST, [(h, d) for h, d in hosts.items() if d])
            gone = [(h,) for h, d in hosts.items() if d < 0]
            if gone:  # keep host_pending to hosts with work, so pending_hosts() stays small
                self._db.executemany("DELETE FROM host_pending WHERE host = ? AND n <= 0", gone)
        changed = [(k, v) for k, v in states.items() if v]
        if changed:
            self._db.executemany(_BUMP_COUNTER, changed)

    # --- crawl database and seen-set -------------------------------------------------------------
    def add_urls(self, records: Sequence[UrlRecord], *, count_inlinks: bool = True) -> list[UrlRecord]:
        batch: dict[int, UrlRecord] = {}
        for rec in records:
            uid = rec.url_id or fingerprint(rec.url)
            if uid not in batch:  # duplicates inside the call count once
                batch[uid] = rec if rec.url_id else replace(rec, url_id=uid)
        if not batch:
            return []
        # One upsert per 500 URLs finds the known ones and bumps their in-links (RETURNING says
        # which rows it inserted); only the new ones then get a full urls row.
        fresh: set[int] = set()
        items = list(batch.items())
        tag = self._link_round if count_inlinks else ""
        with self._tx():
            if tag:  # a re-run of this round: URLs it already counted are known, and count no more
                items = claim_round(self._db, tag, items)
            for start in range(0, len(items), CHUNK):
                chunk = items[start : start + CHUNK]
                params: list[object] = []
                for uid, rec in chunk:
                    params += (uid, rec.inlinks, max(1, rec.inlinks))
                rows = self._db.execute(_upsert_seen(len(chunk), count_inlinks), params)
                fresh.update(uid for uid, ins in rows if ins)
            new = [rec if rec.state == UrlState.PENDING else replace(rec, state=UrlState.PENDING)
                   for uid, rec in items if uid in fresh]  # fmt: skip
            if new:
                self._db.executemany(_INSERT_URL, map(url_row, new))
                self._db.executemany(_INSERT_HOPS, [(r.url_id, r.redirect_hops) for r in new if r.redirect_hops])
                self._db.executemany(_INSERT_LINK_META, [(r.url_id, r.link_meta) for r in new if r.link_meta])
                self._bump(Counter(r.host for r in new), {"pending": len(new)})
        return new

    def set_link_round(self, round_id: str) -> None:
        """Tag later ``add_urls`` in-link counts with a link-jobs round: one round counts a URL once."""
        self._db.execute(LINK_ROUNDS_DDL)
        self._link_round = round_id

    def seen(self, urls: Sequence[str]) -> set[str]:
        by_id = {fingerprint(u): u for u in urls}
        if not by_id:
            return set()
        rows = self._select_in("SELECT url_id FROM seen WHERE url_id IN ({marks})", list(by_id))
        return {by_id[row[0]] for row in rows}

    def iter_url_ids(self) -> Iterator[int]:
        # One statement on its own cursor; the rows stream without a list of a million tuples.
        for (uid,) in self._db.execute("SELECT url_id FROM seen"):
            yield uid

    def get_url(self, url: str) -> UrlRecord | None:
        row = self._db.execute(f"{_SELECT_URL} WHERE u.url_id = ?", (fingerprint(url),)).fetchone()
        return None if row is None else _url_record(row)

    # --- pending set -----------------------------------------------------------------------------
    def pending(
        self, host: str, limit: int, *, after: tuple[int, str] | None = None, refetches_only: bool = False
    ) -> list[UrlRecord]:
        if refetches_only:
            return sqlite_revisits.pending_refetches(self, host, limit)
        if after is None:
            rows = self._db.execute(_SELECT_PENDING, (host, limit))
        else:
            rows = self._db.execute(_SELECT_PENDING_AFTER, (host, after[0], after[1], limit))
        return [_url_record(row) for row in rows]

    def pending_hosts(self, limit: int = 1_000_000) -> list[tuple[str, int]]:
        return [(h, n) for h, n in self._db.execute(_SELECT_PENDING_HOSTS, (limit,))]

    def taken_per_host(self) -> dict[str, int]:
        return {h: n for h, n in self._db.execute(_SELECT_TAKEN)}

    # --- results ---------------------------------------------------------------------------------
    def record_results(self, outcomes: Sequence[Outcome]) -> int:
        batch: dict[int, Outcome] = {}
        for out in outcomes:
            batch.setdefault(out.url_id or fingerprint(out.url), out)  # a replay inside one call counts once
        if not batch:
            return 0
        # Compress before the transaction: the write lock is held only for the statements.
        bodies = {uid: encode_body(o.page, self._level) for uid, o in batch.items() if o.page is not None}
        with self._tx():
            live = self._select_in(
                "SELECT url_id, host FROM urls WHERE url_id IN ({marks}) AND state = 0", list(batch)
            )
            if not live:
                return 0
            hosts: Counter[str] = Counter()
            states: Counter[str] = Counter()
            updates = []
            with_page: list[int] = []
            for uid, host in live:
                out = batch[uid]
                updates.append(
                    (int(out.state), out.status, out.fetched_at, out.signature, out.error, out.retries, uid)
                )
                if out.state != UrlState.PENDING:
                    hosts[host] -= 1
                    states["pending"] -= 1
                    states[_STATE_NAMES[UrlState(out.state)]] += 1
                if uid in bodies:
                    with_page.append(uid)
            self._db.executemany(
                "UPDATE urls SET state = ?, status = ?, fetched_at = ?, signature = ?, error = ?, retries = ? "
                "WHERE url_id = ?",
                updates,
            )
            if with_page:
                # Bodies first: a kill before COMMIT leaves unreferenced bytes, never a dangling row.
                refs = self._bodies.append([bodies[uid][1] for uid in with_page])
                rows = [
                    page_row(uid, batch[uid].page, bodies[uid][0], ref)
                    for uid, ref in zip(with_page, refs, strict=True)
                ]
                # A first fetch's page is new; a re-fetch (a revisit with earlier fetches) replaces its page,
                # whose old body bytes stay unreferenced in the append-only body log.
                again = [u for u in with_page if (r := batch[u].revisit) is not None and r.fetches > 1]
                if again:
                    known = self._select_in("SELECT url_id FROM pages WHERE url_id IN ({marks})", again)
                    states["pages"] -= len(known)
                self._db.executemany(_INSERT_PAGE, rows)
                states["pages"] += len(rows)
            revisits = [revisit_row(uid, r) for uid, _ in live if (r := batch[uid].revisit) is not None]
            if revisits:
                self._db.executemany(_UPSERT_REVISIT, revisits)
            self._bump(hosts, states)
        return len(live)

    # --- re-crawling (sqlite_revisits) ------------------------------------------------------------
    def requeue_due(self, now: float, limit: int, *, hosts: Mapping[str, int] | None = None) -> dict[str, int]:
        return sqlite_revisits.requeue_due(self, now, limit, hosts=hosts)

    def put_revisits(self, items: Sequence[tuple[str, Revisit]]) -> int:
        return sqlite_revisits.put_revisits(self, items)

    def get_revisit(self, url: str) -> Revisit | None:
        return sqlite_revisits.get_revisit(self, url)

    def _page(self, row: tuple) -> PageRecord:  # type: ignore[type-arg]
        return page_record(row, self._bodies.read)

    def get_page(self, url: str) -> PageRecord | None:
        row = self._db.execute(
            f"SELECT {_PAGE_COLS} FROM pages WHERE url_id = ?", (fingerprint(url),)
        ).fetchone()
        return None if row is None else self._page(row)

    def iter_pages(self) -> Iterator[PageRecord]:
        """Pages in url_id order, read in pages of 256 rows (no cursor stays open between them)."""
        last: int | None = None
        while True:
            if last is None:
                rows = self._db.execute(
                    f"SELECT {_PAGE_COLS} FROM pages ORDER BY url_id LIMIT 256"
                ).fetchall()
            else:
                sql = f"SELECT {_PAGE_COLS} FROM pages WHERE url_id > ? ORDER BY url_id LIMIT 256"
                rows = self._db.execute(sql, (last,)).fetchall()
            if not rows:
                return
            last = rows[-1][1]
            yield from (self._page(r) for r in rows)

    def counts(self) -> dict[str, int]:
        return {name: n for name, n in self._db.execute("SELECT name, n FROM counters")}

    # --- serial ids and metadata -----------------------------------------------------------------
    def reserve_serials(self, n: int) -> range:
        if n < 0:
            raise ValueError("n must be >= 0")
        with self._tx():
            (end,) = self._db.execute(
                "UPDATE serials SET next = next + ? WHERE id = 0 RETURNING next", (n,)
            ).fetchone()
        return range(end - n, end)

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put_meta(self, key: str, value: str) -> None:
        with self._tx():
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def swap_meta(self, key: str, expected: str | None, new: str) -> bool:
        with self._tx():
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if (None if row is None else str(row[0])) != expected:
                return False
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, new))
        return True

    def scan_meta(self, prefix: str) -> Iterator[tuple[str, str]]:
        rows = self._db.execute("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ? ORDER BY key",
                                (len(prefix), prefix)).fetchall()  # fmt: skip
        return iter([(str(k), str(v)) for k, v in rows])

    def delete_meta(self, keys: Sequence[str]) -> None:
        with self._tx():
            self._db.executemany("DELETE FROM meta WHERE key = ?", [(k,) for k in keys])

    def flush(self) -> None:
        # Commits already survive a process kill; fsync and a checkpoint make them survive power loss.
        self._bodies.sync()
        self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        """Checkpoint and close; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None
        try:
            tidy_on_close(self._db)
        finally:
            self._db.close()
            self._bodies.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
