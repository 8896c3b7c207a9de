"""The HBase store's re-crawl methods (issue #23), apart from ``hbase.py`` to keep each module small.

The due index is its own table, ``{prefix}_due``: key = next fetch (8-byte big-endian double) | row key,
so ``requeue_due`` is one bounded scan from the start of the table; the URL's state lives in the crawl db's
``m:R`` cell. The Poisson policy's per-host histograms live in the meta table (``get_host_rates``,
``add_host_rates``: ``jobs/recrawl.py`` calls them with the store). See :class:`pipeline.storage.base.Store` for the contracts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pipeline.storage.base import Revisit, UrlRecord, UrlState
from pipeline.storage.hbase_cells import _D, _I, due_key, pending_key, revisit_cell, revisit_from, url_record
from pipeline.storage.rowkey import authority_key, row_key


class HBaseStore(Protocol):
    """What these functions use of ``pipeline.storage.hbase.HBaseStore`` (a protocol: no import cycle)."""

    def _call(self, fn: Any) -> Any: ...
    def _rows(
        self, table: str, keys: Sequence[bytes], columns: list[bytes] | None = None
    ) -> dict[bytes, Any]: ...
    def _put(self, table: str, rows: Any) -> None: ...
    def _delete(self, table: str, keys: Sequence[bytes]) -> None: ...
    def _increment(self, incs: Any) -> None: ...
    @property
    def url_cols(self) -> list[bytes]: ...


_STATE_NAMES = {s: s.name.lower() for s in UrlState}
HOSTS_SCAN = 20  # requeue_due for some hosts: due entries read per URL asked for


def requeue_due(
    self: HBaseStore, now: float, limit: int, *, hosts: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Scans the due index up to ``now``; per due URL: a pending row, then the PENDING state, then the
    due entry is deleted (a crash in between leaves a due entry of a PENDING URL, skipped and removed
    by the next call). With ``hosts`` the scan reads up to ``HOSTS_SCAN`` times ``limit`` entries (the
    index is by due time, not host) and keeps those of the hosts asked for."""
    if limit <= 0 or (hosts is not None and not any(n > 0 for n in hosts.values())):
        return {}
    stop = due_key(now, b"\xff")
    span = limit if hosts is None else limit * HOSTS_SCAN
    keys = self._call(
        lambda c: [k for k, _ in c.table("due").scan(row_stop=stop, limit=span, batch_size=min(span, 1000))]
    )
    if not keys:
        return {}
    url_keys = [k[8:] for k in keys]
    rows = self._rows("crawldb", url_keys, [b"m:s", b"m:d", b"m:h"])
    left = dict(hosts) if hosts is not None else None
    taken: list[bytes] = []
    for key, ukey in zip(keys, url_keys, strict=True):
        row = rows.get(ukey)
        if left is not None and row is not None:
            h = row[b"m:h"].decode()
            if left.get(h, 0) <= 0 or len(taken) >= limit:
                continue
            left[h] -= 1
        taken.append(key)
    keys, url_keys = taken, [k[8:] for k in taken]
    hosts_out: Counter[str] = Counter()
    states: Counter[str] = Counter()
    pend, flips, index = [], [], []
    for ukey in dict.fromkeys(url_keys):
        row = rows.get(ukey)
        if row is None or row[b"m:s"][0] not in (UrlState.DONE, UrlState.FAILED):
            continue
        host = row[b"m:h"].decode()
        pend.append((pending_key(host, _I.unpack(row[b"m:d"])[0], ukey), {b"p:x": b""}))
        index.append((authority_key(host) + b"|" + ukey, {b"r:x": b""}))
        flips.append((ukey, {b"m:s": bytes([UrlState.PENDING])}))
        hosts_out[host] += 1
        states["pending"] += 1
        states[_STATE_NAMES[UrlState(row[b"m:s"][0])]] -= 1
    self._put("refetch", index)  # before the pending row: a URL PENDING again is always in the index
    self._put("pending", pend)
    self._put("crawldb", flips)
    self._delete("due", keys)
    self._increment(("meta", b"counts", f"c:{name}".encode(), n) for name, n in states.items())
    return dict(hosts_out)


def pending_refetches(self: HBaseStore, host: str, limit: int) -> list[UrlRecord]:
    """``Store.pending(host, limit, refetches_only=True)``: the host's rows of the refetch index, whose
    URLs are still PENDING (rows of URLs settled since are deleted as they are met). The index holds only
    URLs the host gave and that came due again, so the read never walks the new URLs of a capped host,
    however many its re-fetched pages keep adding to the pending table."""
    prefix = authority_key(host) + b"|"
    stop = prefix[:-1] + bytes([prefix[-1] + 1])
    start = prefix
    out: list[UrlRecord] = []
    while len(out) < limit:
        want = min(1000, 2 * (limit - len(out)))
        keys = self._call(
            lambda c, s=start, w=want: [  # type: ignore[misc]
                k for k, _ in c.table("refetch").scan(row_start=s, row_stop=stop, limit=w, batch_size=w)
            ]
        )
        if not keys:
            break
        rows = self._rows("crawldb", [k[len(prefix) :] for k in keys], self.url_cols)
        stale = []
        for key in keys:
            row = rows.get(key[len(prefix) :])
            if row and row[b"m:s"][0] == UrlState.PENDING and len(out) < limit:
                out.append(url_record(row))
            elif not row or row[b"m:s"][0] != UrlState.PENDING:
                stale.append(key)
        self._delete("refetch", stale)
        if len(keys) < want:
            break
        start = keys[-1] + b"\x00"
    return out


def put_revisits(self: HBaseStore, items: Sequence[tuple[str, Revisit]]) -> int:
    """Due entry first, then the crawl-db cell, then the old due entry goes (a crash leaves a stale due
    entry, which requeue_due treats as due early at worst)."""
    by_key = {row_key(url): r for url, r in items}
    rows = self._rows("crawldb", list(by_key), [b"m:s", b"m:R"])
    stale = [due_key(old.next_fetch, k) for k, row in rows.items() if (old := revisit_from(row.get(b"m:R")))]
    self._put("due", ((due_key(by_key[k].next_fetch, k), {b"d:x": b""}) for k in rows))
    self._put("crawldb", ((k, {b"m:R": revisit_cell(by_key[k])}) for k in rows))
    fresh = {due_key(by_key[k].next_fetch, k) for k in rows}
    self._delete("due", [k for k in stale if k not in fresh])
    return len(rows)


def get_revisit(self: HBaseStore, url: str) -> Revisit | None:
    row = self._call(lambda c: c.table("crawldb").row(row_key(url), columns=[b"m:R"]))
    return revisit_from(row.get(b"m:R")) if row else None


# --- the Poisson policy's per-host histograms (pipeline.frontier.hostrates), for the fleet's update job ----
# One meta row per host, b"hr:" + host: counters c:<key> (URLs per rate bucket, key "p" = not estimated yet),
# added with increments so that concurrent map tasks add up; the solve state m:mu, m:at (doubles) and m:dirty
# (b"1"/b"0"), last write wins (any writer's solve is a valid one for the histogram it read).
_HOST_ROW = b"hr:"


def get_host_rates(
    self: HBaseStore, hosts: Sequence[str]
) -> dict[str, tuple[dict[str, int], float | None, float | None, bool]]:
    """Per host that has a row: (counts by key text, mu or None, solved-at or None, dirty)."""
    rows = self._rows("meta", [_HOST_ROW + h.encode() for h in dict.fromkeys(hosts)])
    out = {}
    for key, row in rows.items():
        counts = {c[2:].decode(): _long(v) for c, v in row.items() if c.startswith(b"c:")}
        mu = _D.unpack(row[b"m:mu"])[0] if len(row.get(b"m:mu", b"")) == 8 else None
        at = _D.unpack(row[b"m:at"])[0] if len(row.get(b"m:at", b"")) == 8 else None
        out[key[len(_HOST_ROW) :].decode()] = (counts, mu, at, row.get(b"m:dirty") == b"1")
    return out


def add_host_rates(
    self: HBaseStore,
    deltas: dict[str, dict[str, int]],
    solved: dict[str, tuple[float | None, float, bool]],
) -> None:
    """Adds ``deltas`` (host -> key text -> URLs) to the counters and writes each host's (mu, solved-at,
    dirty); a mu of None deletes nothing and writes no m:mu (the default mu stays)."""
    self._increment(
        ("meta", _HOST_ROW + h.encode(), b"c:" + k.encode(), n)
        for h, ks in deltas.items()
        for k, n in ks.items()
    )
    puts = []
    for h, (mu, at, dirty) in solved.items():
        cells = {b"m:dirty": b"1" if dirty else b"0"}
        if mu is not None and math.isfinite(at):
            cells[b"m:mu"], cells[b"m:at"] = _D.pack(mu), _D.pack(at)
        puts.append((_HOST_ROW + h.encode(), cells))
    self._put("meta", puts)


def _long(value: bytes) -> int:
    return int.from_bytes(value, "big", signed=True) if len(value) == 8 else 0


def get_revisits(self: HBaseStore, urls: Sequence[str]) -> dict[str, Revisit]:
    """``get_revisit`` for many URLs, a round trip per 1,000 (the fleet's update job reads a batch's states,
    or a sitemap's up to 50,000 entries)."""
    keys = {row_key(u): u for u in dict.fromkeys(urls)}
    order = list(keys)
    out: dict[str, Revisit] = {}
    for i in range(0, len(order), 1000):
        for k, row in self._rows("crawldb", order[i : i + 1000], [b"m:R"]).items():
            if k in keys and (rv := revisit_from(row.get(b"m:R"))) is not None:
                out[keys[k]] = rv
    return out
