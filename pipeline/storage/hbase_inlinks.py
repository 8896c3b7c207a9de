"""How the HBase store raises the in-link counts of known URLs (#18, #23 point 5), apart from ``hbase.py``.

Two ways, chosen by ``HBaseStore``:

- **Blind, per round** (a link-jobs round, ``set_link_round``, on a crawl db with family ``n``): a known URL
  gets one cell ``n:<round id>`` holding the in-links this round found, written without reading the row.
  The fleet's update step raises every distinct known target of every round; measured on 2026-11-24
  (before f0f182d), reading each row first made HBase the fleet's largest CPU user (~5.5 rows read and 4.5 put per fetched
  page). A blind put is idempotent: a round killed mid-merge and run again under its id writes the same
  cells with the same values.
- **Read-then-put** (the embedded crawl, seeds, crawl dbs made before family ``n``): ``m:n`` is read and
  put back raised, tagged ``m:L`` with the round when there is one so that a re-run counts a URL once.

Folding keeps a row's round cells few: with probability 1/``FOLD_EVERY`` per URL and round (a hash of
both, so a re-run chooses the same) the round reads the row and puts ``m:n`` = the whole count with
``m:W`` = this round in one put (HBase writes a row's cells atomically), then deletes the folded cells.
Readers (``hbase_cells.inlinks_of``) ignore cells of rounds up to ``m:W``, so the delete may fail or
come late, and a re-run of a folded round adds nothing. This needs round ids that sort in the order the
rounds merge, and, as before, one round at a time per URL. ``pipeline.transport.links.rounds.RoundBook`` makes such ids and says
so by their form (``ordered``: ``r``, 20 digits of wall-clock ns, 8 hex digits); a round with another id
(``crawlfleet jobs run`` names a round after its segment's path) is counted read-then-put.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pipeline.storage.base import UrlRecord
from pipeline.storage.hbase_cells import _Q, FOLDED, LINK_ROUND, _long
from pipeline.storage.rowkey import row_key

FOLD_EVERY = 16
_ORDERED = re.compile(rb"r[0-9]{20}[0-9a-f]{8}")


def ordered(tag: bytes) -> bool:
    """Whether a round id has the form of ids that sort in merge order (module docstring)."""
    return _ORDERED.fullmatch(tag) is not None


class HBaseStore(Protocol):
    """What this module uses of ``pipeline.storage.hbase.HBaseStore`` (a protocol: no import cycle)."""

    def _put(self, table: str, rows: Iterable[tuple[bytes, dict[bytes, bytes]]]) -> None: ...
    def _rows(self, table: str, keys: Sequence[bytes], columns: list[bytes] | None = None) -> dict[bytes, Any]: ...
    batch_size: int

    def _call(self, fn: Any) -> Any: ...


def counts_of(records: Sequence[UrlRecord]) -> dict[bytes, int]:
    """Row key -> the records' summed in-links (each at least 1)."""
    counts: dict[bytes, int] = {}
    for rec in records:
        key = row_key(rec.url)
        counts[key] = counts.get(key, 0) + max(1, rec.inlinks)
    return counts


def fold_chosen(key: bytes, tag: bytes) -> bool:
    """Whether round ``tag`` folds the row ``key`` (the same answer for a re-run of the round)."""
    return zlib.crc32(key, zlib.crc32(tag)) % FOLD_EVERY == 0


def raise_blind(store: HBaseStore, counts: dict[bytes, int], tag: bytes) -> None:
    """Add ``counts`` (row key -> this round's in-links, each row known) as round ``tag``'s cells; fold the
    chosen rows (module docstring). One put round trip, plus one read and one delete when rows fold."""
    cell = b"n:" + tag
    fold = [key for key in counts if fold_chosen(key, tag)]
    skip = set(fold)
    store._put("crawldb", ((key, {cell: _Q.pack(n)}) for key, n in counts.items() if key not in skip))
    if not fold:
        return
    rows = store._rows("crawldb", fold, [b"m:n", FOLDED, b"n"])
    puts: list[tuple[bytes, dict[bytes, bytes]]] = []
    stale: list[tuple[bytes, list[bytes]]] = []
    for key in fold:
        row = rows.get(key, {})
        if b"m:n" not in row:  # every crawl-db row has m:n: never write a row the store lacks
            continue
        upto = row.get(FOLDED, b"")
        if upto >= tag:  # this round folded the row already: a re-run
            continue
        cells = [col for col in row if col.startswith(b"n:")]
        total = _long(row.get(b"m:n")) + sum(_long(row[col]) for col in cells if col[2:] > upto)
        if cell not in row:  # else this round's blind cell is in already (a re-run that did not fold)
            total += counts[key]
        puts.append((key, {b"m:n": _Q.pack(total), FOLDED: tag}))
        if cells:
            stale.append((key, cells))
    store._put("crawldb", puts)
    if stale:  # after the put: readers ignore these cells from now on

        def send(conn: Any) -> None:
            with conn.table("crawldb").batch(batch_size=store.batch_size) as batch:
                for key, columns in stale:
                    batch.delete(key, columns=columns)

        store._call(send)


def raise_read(store: HBaseStore, known: dict[bytes, dict[bytes, bytes]], counts: dict[bytes, int],
               tag: bytes) -> None:
    """Put ``m:n`` raised by ``counts`` on the ``known`` rows as read (``m:n``, ``LINK_ROUND``), skipping rows
    round ``tag`` counted already; m:n and m:L in one put, so a kill leaves both or neither."""
    if tag:
        known = {key: row for key, row in known.items() if row.get(LINK_ROUND) != tag}
    # A put of the new count, not an HBase increment: an increment is a locked read-modify-write per cell
    # on the server (measured: 0.43 ms per known URL against 0.02 ms for the put).
    store._put("crawldb", ((key, {b"m:n": _Q.pack(_long(row.get(b"m:n")) + counts[key]),
                                  **({LINK_ROUND: tag} if tag else {})})
                           for key, row in known.items()))  # fmt: skip
