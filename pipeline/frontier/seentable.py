"""An exact, compact, in-RAM set of URL fingerprints: the embedded crawl's whole seen-set in 8 B a URL.

S5's LRU answers the links that repeat within a short time. In a large crawl most links are *not*
recent: at a million known URLs a 200k LRU misses most of them, and every miss is a random look-up
in a million-row B-tree (#11: that made the 1M crawl cost 1.8x the CPU per page of the 10k crawl).
When one process is the only writer of the seen-set (the embedded crawl), it can hold the whole
seen-set itself, exactly, and ask the store only to insert URLs that are new.

Layout (S2's compact-table idea applied to fingerprints): a sorted ``int64`` numpy array (8 B per
fingerprint, binary-searched for a whole batch at once) plus a small Python set of recent additions
that is merged into the array whenever it reaches ``tail_max`` entries (a linear merge, amortised
to a few ns per fingerprint).

Contract:
- ``contains_many`` is exact for every fingerprint ever passed to ``add_many``/``load``.
- ``complete`` says whether a miss means "new": it stays True while every fingerprint of the store
  is in the table, and turns False for good once ``max_entries`` would be exceeded (the table then
  keeps answering hits, and the caller must ask the store about misses).
- Memory: ``8 * len`` bytes for the array, up to ``tail_max`` Python ints in the tail, and during a
  merge a second array of the merged size.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice

import numpy as np

_LOAD_CHUNK = 1 << 20


class FingerprintTable:
    """Exact set of signed 64-bit fingerprints, up to ``max_entries`` of them. One thread at a time."""

    def __init__(self, *, max_entries: int, tail_max: int = 1 << 16) -> None:
        if max_entries < 0 or tail_max < 1:
            raise ValueError("max_entries must be >= 0 and tail_max >= 1")
        self._base = np.empty(0, dtype=np.int64)
        self._tail: set[int] = set()
        self._max = max_entries
        self._tail_max = tail_max
        self.complete = True
        self.merges = 0

    def __len__(self) -> int:
        return len(self._base) + len(self._tail)

    @property
    def nbytes(self) -> int:
        """Bytes held: the array, plus ~60 B per tail entry (a Python int and its set slot)."""
        return int(self._base.nbytes) + 60 * len(self._tail)

    def load(self, ids: Iterable[int]) -> None:
        """Bulk-add fingerprints (the store's seen-set at start-up), in chunks, any order, repeats allowed."""
        if self._tail:
            self._flush_tail()  # so that len() counts a fingerprint in both only once
        it = iter(ids)
        while True:
            chunk = np.fromiter(islice(it, _LOAD_CHUNK), dtype=np.int64)
            if not len(chunk):
                break
            if len(self) + len(chunk) > self._max:
                self.complete = False
                room = self._max - len(self)
                if room <= 0:
                    return
                chunk = chunk[:room]
            self._merge(chunk)
            if not self.complete:
                return

    def contains_many(self, ids: Sequence[int]) -> list[bool]:
        """For each fingerprint, whether it is in the table (one vectorised search for the batch)."""
        n = len(ids)
        if n == 0:
            return []
        arr = np.fromiter(ids, dtype=np.int64, count=n)
        base = self._base
        if len(base):
            pos = np.searchsorted(base, arr)
            np.minimum(pos, len(base) - 1, out=pos)
            hits: list[bool] = (base[pos] == arr).tolist()
        else:
            hits = [False] * n
        tail = self._tail
        if tail:
            for i, uid in enumerate(ids):
                if not hits[i] and uid in tail:
                    hits[i] = True
        return hits

    def add_many(self, ids: Iterable[int]) -> None:
        """Add fingerprints the store now holds. Past ``max_entries`` the table stops growing and is no
        longer ``complete``."""
        tail = self._tail
        for uid in ids:
            if not self.complete:
                return
            if uid in tail:
                continue
            if len(self) >= self._max:
                self.complete = False  # whether uid is already in the array no longer matters
                return
            tail.add(uid)
            if len(tail) >= self._tail_max:
                self._flush_tail()
                tail = self._tail

    def _flush_tail(self) -> None:
        fresh = np.fromiter(self._tail, dtype=np.int64, count=len(self._tail))
        self._tail = set()
        self._merge(fresh)

    def _merge(self, fresh: np.ndarray) -> None:
        """Merge ``fresh`` (any order, may repeat or overlap the array) into the sorted array."""
        fresh = np.unique(fresh)
        base = self._base
        if len(base):
            pos = np.searchsorted(base, fresh)
            inside = np.minimum(pos, len(base) - 1)
            keep = base[inside] != fresh
            fresh, pos = fresh[keep], pos[keep]
            base = np.insert(base, pos, fresh)
        else:
            base = fresh
        self._base = base
        self.merges += 1
