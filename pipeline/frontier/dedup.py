"""S5's local dedup cache in front of the remote seen-set.

S5 found dedup traffic to be a crawler's largest communication cost: the same URL is looked up many
times within a short time (navigation links repeat on every page of a site). ``SeenFilter`` keeps a
bounded LRU of recently seen URL fingerprints and sends only the rest to the store, all of a batch in
ONE ``Store.add_urls`` call (one round trip), whose return value says which URLs were new.

A cached answer is never wrong: the seen-set only grows, so a fingerprint once seen stays seen.
Memory is bounded by ``lru_size`` ints (no set of URL strings is kept).

Behind the LRU, an optional :class:`~pipeline.frontier.seentable.FingerprintTable` holds every fingerprint
this filter has seen the store hold, in 8 B each: the URLs it knows never reach the store, so at a
million known URLs a link costs a binary search instead of a B-tree probe. It only ever holds
fingerprints the store has (added after the store call returns), so a table hit is as safe as an
LRU hit, with a shared store too; a miss still asks the store.

In-link counts: ``add_urls`` raises the count of known URLs. A URL answered by the LRU skips that
call, so with ``track_inlinks=True`` its increment is kept in a small bounded buffer (one entry per
URL, increments summed) and rides along with the next remote call, or goes out on ``flush()``. A store
that raises counts without reading (``Store.blind_inlinks``: HBase inside a link-jobs round) gets them
apart, through ``Store.raise_inlinks``, when the buffer is full or on ``flush()``: a seen-cache hit then
costs the store one blind put a round and no read.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline.frontier.seentable import FingerprintTable
from pipeline.storage.base import Store, UrlRecord


@dataclass(slots=True)
class SeenStats:
    """Counters since construction.

    ``local_hits``: URLs answered locally (LRU hit, or a repeat inside one batch).
    ``table_hits``: URLs the LRU missed and the fingerprint table answered.
    ``remote_lookups``: URLs whose seen-status was asked of the store.
    ``round_trips``: calls to the store. ``inlink_updates``: known URLs sent only to raise in-links.
    """

    local_hits: int = 0
    table_hits: int = 0
    remote_lookups: int = 0
    round_trips: int = 0
    inlink_updates: int = 0
    new: int = 0
    evictions: int = 0


class SeenFilter:
    """Bounded LRU of URL fingerprints in front of ``store.add_urls``. One thread at a time."""

    def __init__(
        self,
        store: Store,
        *,
        lru_size: int,
        track_inlinks: bool = False,
        max_buffered_inlinks: int = 10_000,
        table: FingerprintTable | None = None,
        lru: OrderedDict[int, None] | None = None,
    ) -> None:
        """``lru``: an LRU to share rather than start empty (a cache carried from round to round in one
        process, jobs/snapshot.py); it must hold only fingerprints this store holds."""
        if lru_size < 0 or max_buffered_inlinks < 1:
            raise ValueError("lru_size must be >= 0 and max_buffered_inlinks >= 1")
        self._store = store
        self._lru: OrderedDict[int, None] = OrderedDict() if lru is None else lru
        self._lru_size = lru_size
        self._track_inlinks = track_inlinks
        self._max_buffered = max_buffered_inlinks
        self._inlinks: dict[int, UrlRecord] = {}  # url_id -> record carrying the summed increment
        self.table = table
        self.stats = SeenStats()

    @property
    def local_hits(self) -> int:
        return self.stats.local_hits

    @property
    def remote_lookups(self) -> int:
        return self.stats.remote_lookups

    @property
    def round_trips(self) -> int:
        return self.stats.round_trips

    def __len__(self) -> int:
        return len(self._lru)

    def preload(self, url_ids: Iterable[int]) -> None:
        """Mark fingerprints as seen without asking the store (oldest first; the LRU bound holds).

        Only for fingerprints the store is known to hold (e.g. a snapshot of this same store's LRU):
        a fingerprint the store lacks would make its URL look seen and never be added.
        """
        lru = self._lru
        for uid in url_ids:
            lru[uid] = None
            lru.move_to_end(uid)
        while len(lru) > self._lru_size:
            lru.popitem(last=False)

    def snapshot(self) -> list[int]:
        """The cached fingerprints, least recently used first (input for ``preload``)."""
        return list(self._lru)

    def known(self, url_id: int) -> bool:
        """True when the local LRU already knows the URL (a cheap pre-filter; no store call).

        False means "ask the store", not "new". Counts as a local hit when True.
        """
        if url_id in self._lru:
            self.stats.local_hits += 1
            return True
        return False

    def known_many(self, url_ids: Sequence[int]) -> list[bool]:
        """For each fingerprint, True when the LRU or the fingerprint table knows it (no store call).

        False means "ask the store", not "new". One vectorised table search for all the LRU's misses,
        so a page's links cost one call however many of them the 200k LRU has forgotten (#11: mid-way
        through a million-page crawl most known links miss the LRU). Table hits are not moved into the
        LRU: the table answers them again as cheaply, and the LRU keeps the recent discoveries.
        """
        lru = self._lru
        out = [uid in lru for uid in url_ids]
        stats = self.stats
        hits = sum(out)
        stats.local_hits += hits
        table = self.table
        if table is not None and hits < len(out):
            miss_at = [i for i, hit in enumerate(out) if not hit]
            found = table.contains_many([url_ids[i] for i in miss_at])
            for i, hit in zip(miss_at, found, strict=True):
                if hit:
                    out[i] = True
                    stats.table_hits += 1
        return out

    def add_new(self, records: Sequence[UrlRecord]) -> list[UrlRecord]:
        """The records whose URL was never seen before; they are now in the store as PENDING.

        Makes at most one store call for the whole sequence (none when the LRU and the table answer
        everything).
        """
        lru = self._lru
        stats = self.stats
        ask: dict[int, UrlRecord] = {}
        for rec in records:
            uid = rec.url_id
            if uid in lru:
                lru.move_to_end(uid)
                stats.local_hits += 1
                if self._track_inlinks:
                    self._buffer_inlink(rec)
                continue
            prior = ask.get(uid)
            if prior is None:
                ask[uid] = rec
            else:  # a repeat inside the batch: one look-up, summed in-links
                stats.local_hits += 1
                if self._track_inlinks:
                    ask[uid] = dataclasses.replace(prior, inlinks=max(prior.inlinks, 1) + max(rec.inlinks, 1))
        table = self.table
        if table is not None and ask:
            asked = list(ask)
            for uid, hit in zip(asked, table.contains_many(asked), strict=True):
                if hit:
                    rec = ask.pop(uid)
                    lru[uid] = None  # a table hit is likely to repeat soon: S5's locality
                    stats.table_hits += 1
                    if self._track_inlinks:
                        self._buffer_inlink(rec)
        blind = self._track_inlinks and self._blind_store()
        full = len(self._inlinks) >= self._max_buffered
        if blind and full:
            self.flush()
        if not ask and (blind or not full):
            self._trim()
            return []
        piggyback = [] if blind else [r for uid, r in self._inlinks.items() if uid not in ask]
        if not blind:
            self._inlinks.clear()
        new = self._remote(list(ask.values()), piggyback)
        if table is not None:  # the store holds every asked URL now: added, or known already
            table.add_many(ask)
        for uid in ask:
            lru[uid] = None
            lru.move_to_end(uid)
        self._trim()
        stats.new += len(new)
        return new

    def _trim(self) -> None:
        lru = self._lru
        while len(lru) > self._lru_size:
            lru.popitem(last=False)
            self.stats.evictions += 1

    def flush(self) -> None:
        """Send buffered in-link increments (one round trip if there are any)."""
        if self._inlinks:
            pending = list(self._inlinks.values())
            self._inlinks.clear()
            if self._blind_store():
                self.stats.round_trips += 1
                self.stats.inlink_updates += len(pending)
                self._store.raise_inlinks(pending)
            else:
                self._remote([], pending)

    def _blind_store(self) -> bool:
        """``Store.blind_inlinks`` of the store (read each time: a link round tags the store after this filter
        is built); False for a stand-in without it."""
        return bool(getattr(self._store, "blind_inlinks", False))

    def _buffer_inlink(self, rec: UrlRecord) -> None:
        prior = self._inlinks.get(rec.url_id)
        if prior is None:
            self._inlinks[rec.url_id] = dataclasses.replace(rec, inlinks=max(rec.inlinks, 1))
        else:
            prior.inlinks += max(rec.inlinks, 1)

    def _remote(self, ask: list[UrlRecord], piggyback: list[UrlRecord]) -> list[UrlRecord]:
        stats = self.stats
        stats.round_trips += 1
        stats.remote_lookups += len(ask)
        stats.inlink_updates += len(piggyback)
        # Without in-link tracking a known URL is only looked up, never written (see Store.add_urls).
        result = self._store.add_urls(ask + piggyback, count_inlinks=self._track_inlinks)
        if piggyback:  # known URLs: the store cannot report them new, but be strict about the contract
            asked = {r.url_id for r in ask}
            result = [r for r in result if r.url_id in asked]
        return result
