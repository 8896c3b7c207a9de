"""S2's positive cache: BCTuples kept in key order, so a TLD (or TLD+SLD) prefix count is a range.

Layout, a two-level log-structured store (no Python object per entry):

* the **segment**: numpy columns sorted by the 76-bit key (``khi`` = top 64 bits, ``tag`` = low 12
  bits + flags, ``ip``, ``born``, ``ttl``): 20 bytes per IPv4 entry, 32 per IPv6, with no empty slots;
  a look-up is a binary search; a delete or an eviction only clears the entry's occupied flag
  (a tombstone, its key kept in a small ``dead`` list);
* the **delta**: a fixed-size :class:`HashTable` of ``capacity // delta_fraction`` entries taking
  new names at O(1). When it is full (or the tombstones reach that size) the two are merged into a
  new sorted segment (a compaction: one ``lexsort``, O(n log n), every ``capacity / delta_fraction``
  inserts).

``count_range(lo, hi)``, S2's "how many names under .com": two binary searches in the segment,
minus the tombstones in the range, plus the delta's entries in the range (one vectorized pass over
the small delta). No pass over the segment.

Memory per IPv4 entry at ``capacity`` entries: 20 bytes in the segment plus the delta's
``20 / 0.85 / delta_fraction`` (1.5 bytes at the default 16) = ~21.5 bytes, within S2's 24-byte
budget. A compaction briefly holds a second copy of the columns. A name with several addresses keeps
the first in the columns and the others packed as bytes in a side dict (~75 bytes for one extra IPv4
address: dict slot, key int, bytes object); the benchmark reports the average with a realistic mix.

Eviction is CLOCK (second chance, S4's LRU approximated) over the segment; names still in the delta
are the newest and are evicted only when the segment has none left. Times are integers supplied by
the caller; this module never reads a clock. Not thread-safe: one event loop owns it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pipeline.dns.hashtable import HashTable, pack_addresses, unpack_addresses

_OCC = 0x1000
_REF = 0x2000
_EXTRA = 0x4000
_LOW12 = 0x0FFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_UINT16_MAX = 0xFFFF
_UINT32_MAX = 0xFFFFFFFF

Entry = tuple[tuple[int, ...], int, int]  # (addresses, born_s, ttl_min)


class PositiveCache:
    """A bounded map from 76-bit name keys to (addresses, born seconds, TTL minutes), in key order.

    ``ipv6`` selects 128-bit addresses. ``delta_fraction`` sets the delta's size (capacity / it).
    """

    __slots__ = ("_capacity", "_dead", "_delta", "_extra", "_hand", "_ipv6", "_live", "_seg", "compactions",
                 "evictions")  # fmt: skip

    def __init__(
        self, capacity: int, *, ipv6: bool = False, load_factor: float = 0.85, delta_fraction: int = 16
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        if delta_fraction < 1:
            raise ValueError("delta_fraction must be >= 1")
        self._capacity = capacity
        self._ipv6 = ipv6
        delta_size = max(16, math.ceil(capacity / delta_fraction))
        self._delta = HashTable(delta_size, ipv6=ipv6, load_factor=load_factor)
        self._seg = _empty_columns(0, ipv6=ipv6)
        self._live = 0  # occupied entries in the segment
        self._dead: list[int] = []  # khi of tombstones in the segment, for range counts
        self._extra: dict[int, bytes] = {}  # extra addresses of segment entries, by key
        self._hand = 0
        self.evictions = 0
        self.compactions = 0

    # -- sizes ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._live + len(self._delta)

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def slots(self) -> int:
        """Entry places allocated: the segment's rows plus the delta's slots."""
        return len(self._seg["khi"]) + self._delta.slots

    def nbytes(self) -> int:
        """Bytes of the segment's columns and the delta's arrays (the extra-address dict is not counted)."""
        return sum(int(a.nbytes) for a in self._seg.values()) + self._delta.nbytes()

    # -- public operations ---------------------------------------------------------------------
    def get(self, key: int, *, touch: bool = True) -> Entry | None:
        """The entry for ``key`` or None; ``touch`` sets its CLOCK reference bit."""
        hit = self._delta.get(key, touch=touch)
        if hit is not None:
            return hit
        i = self._find(key)
        if i < 0:
            return None
        seg = self._seg
        t = int(seg["tag"][i])
        if touch and not t & _REF:
            seg["tag"][i] = t | _REF
        first = self._read_ip(i)
        ips = (first, *unpack_addresses(self._extra[key], ipv6=self._ipv6)) if t & _EXTRA else (first,)
        return ips, int(seg["born"][i]), int(seg["ttl"][i])

    def put(self, key: int, addresses: Sequence[int], *, born_s: int, ttl_min: int) -> None:
        """Store or replace ``key``. May evict one other entry (CLOCK) when the cache is full."""
        if not addresses:
            raise ValueError("an entry needs at least one address")
        i = self._find(key)
        if i >= 0:  # replace in place: no change of size or order
            seg = self._seg
            tag = (key & _LOW12) | _OCC | _REF
            self._extra.pop(key, None)
            if len(addresses) > 1:
                self._extra[key] = pack_addresses(addresses[1:], ipv6=self._ipv6)
                tag |= _EXTRA
            seg["tag"][i] = tag
            self._write_ip(i, addresses[0])
            seg["born"][i] = min(max(born_s, 0), _UINT32_MAX)
            seg["ttl"][i] = min(max(ttl_min, 0), _UINT16_MAX)
            return
        if self._delta.get(key, touch=False) is None:
            if len(self) >= self._capacity:
                self._evict_one()
            if len(self._delta) >= self._delta.capacity:
                self._compact()
        self._delta.put(key, addresses, born_s=born_s, ttl_min=ttl_min)

    def delete(self, key: int) -> bool:
        """Remove ``key``; True if it was present."""
        if self._delta.delete(key):
            return True
        i = self._find(key)
        if i < 0:
            return False
        self._tombstone(i)
        return True

    def count_range(self, lo: int, hi: int) -> int:
        """How many stored keys fall in ``[lo, hi)``; both bounds must be multiples of 4096.

        This is the S2 prefix query: with :func:`pipeline.dns.keys.prefix_range` it counts the names
        under a TLD or a TLD+SLD by binary search over the ordered segment (see the module docstring).
        """
        if lo & _LOW12 or hi & _LOW12:
            raise ValueError("range bounds must be multiples of 4096 (prefixes of at most 64 bits)")
        a, b = lo >> 12, hi >> 12
        khi = self._seg["khi"]
        left = int(np.searchsorted(khi, np.uint64(min(a, _MASK64)), side="left"))
        right = len(khi) if b > _MASK64 else int(np.searchsorted(khi, np.uint64(b), side="left"))
        in_segment = right - left
        if self._dead:
            dead = np.asarray(self._dead, dtype=np.uint64)
            inside = dead >= np.uint64(min(a, _MASK64))
            if b <= _MASK64:
                inside &= dead < np.uint64(b)
            in_segment -= int(np.count_nonzero(inside))
        return in_segment + self._delta.count_range(lo, hi)

    def keys(self) -> list[int]:
        """Every stored key (for tests and tools; O(n))."""
        seg = self._seg
        occ = (seg["tag"] & _OCC) != 0
        ordered = [
            (int(k) << 12) | (int(t) & _LOW12) for k, t in zip(seg["khi"][occ], seg["tag"][occ], strict=True)
        ]
        return ordered + self._delta.keys()

    def compact(self) -> None:
        """Merge the delta into the segment now (normally done when the delta fills)."""
        self._compact()

    # -- internals -----------------------------------------------------------------------------
    def _find(self, key: int) -> int:
        """Row of the live segment entry holding ``key``, or -1."""
        khi_col = self._seg["khi"]
        n = len(khi_col)
        if not n:
            return -1
        khi, low = key >> 12, key & _LOW12
        i = int(np.searchsorted(khi_col, np.uint64(khi), side="left"))
        tags = self._seg["tag"]
        while i < n and int(khi_col[i]) == khi:
            t = int(tags[i])
            if (t & _LOW12) == low:
                return i if t & _OCC else -1
            i += 1
        return -1

    def _read_ip(self, i: int) -> int:
        ip = self._seg["ip"]
        if self._ipv6:
            return (int(ip[i, 0]) << 64) | int(ip[i, 1])
        return int(ip[i])

    def _write_ip(self, i: int, value: int) -> None:
        ip = self._seg["ip"]
        if self._ipv6:
            ip[i, 0], ip[i, 1] = value >> 64, value & _MASK64
        else:
            ip[i] = value

    def _tombstone(self, i: int) -> None:
        seg = self._seg
        t = int(seg["tag"][i])
        khi = int(seg["khi"][i])
        if t & _EXTRA:
            self._extra.pop((khi << 12) | (t & _LOW12), None)
        seg["tag"][i] = t & _LOW12  # not occupied; the low key bits stay so the row still sorts
        self._live -= 1
        self._dead.append(khi)
        if len(self._dead) >= self._delta.capacity:
            self._compact()

    def _evict_one(self) -> None:
        """CLOCK over the segment's live rows; the delta (the newest names) only when the segment has none."""
        self.evictions += 1
        if self._live == 0:
            self._delta.evict_one()
            return
        tags = self._seg["tag"]
        n = len(tags)
        h = self._hand % n
        while True:
            t = int(tags[h])
            if t & _OCC:
                if t & _REF:
                    tags[h] = t & ~_REF
                else:
                    self._hand = h + 1
                    self._tombstone(h)
                    return
            h += 1
            if h == n:
                h = 0

    def _compact(self) -> None:
        """Merge live segment rows and the delta into a new sorted segment; tombstones are dropped."""
        seg = self._seg
        occ = (seg["tag"] & _OCC) != 0
        fresh = self._delta.columns()
        merged = {name: np.concatenate([seg[name][occ], fresh[name]]) for name in seg}
        order = np.lexsort((merged["tag"] & _LOW12, merged["khi"]))
        self._seg = {name: col[order] for name, col in merged.items()}
        self._extra.update(self._delta.extras())
        self._delta.clear()
        self._live = len(order)
        self._dead = []
        self._hand = int(self._hand * len(order) / max(1, len(occ)))  # keep the hand's relative place
        self.compactions += 1


def _empty_columns(n: int, *, ipv6: bool) -> dict[str, np.ndarray]:
    return {
        "khi": np.zeros(n, dtype=np.uint64),
        "tag": np.zeros(n, dtype=np.uint16),
        "ip": np.zeros((n, 2), dtype=np.uint64) if ipv6 else np.zeros(n, dtype=np.uint32),
        "born": np.zeros(n, dtype=np.uint32),
        "ttl": np.zeros(n, dtype=np.uint16),
    }
