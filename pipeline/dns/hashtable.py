"""The delta of S2's positive cache: BCTuples in a fixed-size open-addressing table (typed arrays).

:class:`pipeline.dns.positive.PositiveCache` keeps most entries in a sorted segment and new ones
here until the next compaction; this table is the one that takes inserts at O(1).

One slot is 20 bytes for IPv4 (32 for IPv6), with no Python object per entry:

==========  ======  ==================================================================
array       bytes   contents
==========  ======  ==================================================================
``_khi``    8       the top 64 bits of the 76-bit key (TLD code, SLD hash, rest hash)
``_tag``    2       the low 12 key bits, plus flags: occupied, CLOCK reference, extra IPs
``_ip``     4 / 16  the first address as an integer (S2: 32 bits IPv4, 128 bits IPv6)
``_born``   4       when the entry was stored, whole seconds since the owner's epoch
``_ttl``    2       the clamped TTL in minutes, uint16 (S2)
==========  ======  ==================================================================

The table has ``ceil(capacity / load_factor)`` slots, allocated up front. Look-ups probe linearly;
deletion shifts the following run back (no tombstones). When ``capacity`` entries are stored,
inserting a new name evicts one chosen by CLOCK (second chance). Names with more than one address
keep the first in the arrays and the others, packed as bytes, in a side dict, flagged in the tag so
the common case never touches it. Times are plain integers supplied by the caller.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import numpy as np

_OCC = 0x1000
_REF = 0x2000
_EXTRA = 0x4000
_LOW12 = 0x0FFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_GOLDEN = 0x9E3779B97F4A7C15
_UINT16_MAX = 0xFFFF
_UINT32_MAX = 0xFFFFFFFF

Entry = tuple[tuple[int, ...], int, int]  # (addresses, born_s, ttl_min)


def pack_addresses(addresses: Sequence[int], *, ipv6: bool) -> bytes:
    """Addresses as one bytes object (4 or 16 bytes each): ~40 bytes of overhead, not a tuple of ints."""
    width = 16 if ipv6 else 4
    return b"".join(a.to_bytes(width, "big") for a in addresses)


def unpack_addresses(data: bytes, *, ipv6: bool) -> tuple[int, ...]:
    width = 16 if ipv6 else 4
    return tuple(int.from_bytes(data[i : i + width], "big") for i in range(0, len(data), width))


def _u32_code() -> str:
    for code in ("I", "L"):
        if array(code).itemsize == 4:
            return code
    raise RuntimeError("no 4-byte unsigned array type")


U32 = _u32_code()
_U32 = U32


class HashTable:
    """A bounded map from 76-bit name keys to (addresses, born seconds, TTL minutes).

    ``ipv6`` selects 128-bit address slots. Not thread-safe: one event loop owns it.
    """

    __slots__ = (
        "_born",
        "_capacity",
        "_extra",
        "_hand",
        "_ip",
        "_ipv6",
        "_khi",
        "_m",
        "_size",
        "_tag",
        "_ttl",
        "evictions",
    )

    def __init__(self, capacity: int, *, ipv6: bool = False, load_factor: float = 0.85) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        if not 0.1 <= load_factor < 1.0:
            raise ValueError("load_factor must be in [0.1, 1)")
        self._capacity = capacity
        self._m = max(capacity + 1, math.ceil(capacity / load_factor))
        m = self._m
        self._ipv6 = ipv6
        # Repetition allocates exactly m items (frombytes would over-allocate by 1/16).
        self._khi = array("Q", [0]) * m
        self._tag = array("H", [0]) * m
        self._ip = array("Q", [0]) * (2 * m) if ipv6 else array(_U32, [0]) * m
        self._born = array(_U32, [0]) * m
        self._ttl = array("H", [0]) * m
        self._extra: dict[int, bytes] = {}
        self._size = 0
        self._hand = 0
        self.evictions = 0

    # -- sizes ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._size

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def slots(self) -> int:
        return self._m

    def nbytes(self) -> int:
        """Bytes held by the slot arrays (the side dict of extra addresses is not counted)."""
        return sum(a.itemsize * len(a) for a in (self._khi, self._tag, self._ip, self._born, self._ttl))

    # -- probing -------------------------------------------------------------------------------
    def _home(self, khi: int, low: int) -> int:
        return ((((khi * _GOLDEN) & _MASK64) >> 20) ^ low) % self._m

    def _find(self, khi: int, low: int) -> int:
        """Slot holding the key, or ``-(slot + 1)`` of the first empty slot of its probe run."""
        tag, keys, m = self._tag, self._khi, self._m
        i = self._home(khi, low)
        while True:
            t = tag[i]
            if not t & _OCC:
                return -(i + 1)
            if (t & _LOW12) == low and keys[i] == khi:
                return i
            i += 1
            if i == m:
                i = 0

    # -- public operations ---------------------------------------------------------------------
    def get(self, key: int, *, touch: bool = True) -> Entry | None:
        """The entry for ``key`` or None; ``touch`` sets its CLOCK reference bit."""
        low = key & _LOW12
        i = self._find(key >> 12, low)
        if i < 0:
            return None
        t = self._tag[i]
        if touch and not t & _REF:
            self._tag[i] = t | _REF
        first = self._read_ip(i)
        ips = (first, *unpack_addresses(self._extra[key], ipv6=self._ipv6)) if t & _EXTRA else (first,)
        return ips, self._born[i], self._ttl[i]

    def put(self, key: int, addresses: Sequence[int], *, born_s: int, ttl_min: int) -> None:
        """Store or replace ``key``. May evict one other entry (CLOCK) when the cache is full."""
        if not addresses:
            raise ValueError("an entry needs at least one address")
        khi, low = key >> 12, key & _LOW12
        i = self._find(khi, low)
        if i < 0:
            if self._size >= self._capacity:
                self._evict_one()
                i = self._find(khi, low)
            i = -i - 1
            self._size += 1
        elif self._tag[i] & _EXTRA:
            del self._extra[key]
        tag = low | _OCC | _REF
        if len(addresses) > 1:
            self._extra[key] = pack_addresses(addresses[1:], ipv6=self._ipv6)
            tag |= _EXTRA
        self._khi[i] = khi
        self._tag[i] = tag
        self._write_ip(i, addresses[0])
        self._born[i] = min(max(born_s, 0), _UINT32_MAX)
        self._ttl[i] = min(max(ttl_min, 0), _UINT16_MAX)

    def delete(self, key: int) -> bool:
        """Remove ``key``; True if it was present."""
        i = self._find(key >> 12, key & _LOW12)
        if i < 0:
            return False
        self._remove_at(i)
        return True

    def count_range(self, lo: int, hi: int) -> int:
        """How many stored keys fall in ``[lo, hi)``; both bounds must be multiples of 4096.

        This is the S2 prefix query: with :func:`pipeline.dns.keys.prefix_range` it counts the
        names under a TLD or a TLD+SLD by one vectorized comparison over the key array.
        """
        if lo & _LOW12 or hi & _LOW12:
            raise ValueError("range bounds must be multiples of 4096 (prefixes of at most 64 bits)")
        keys = np.frombuffer(self._khi, dtype=np.uint64)
        occupied = (np.frombuffer(self._tag, dtype=np.uint16) & _OCC) != 0
        lo_hi = np.uint64(min(lo >> 12, _MASK64))
        inside = keys >= lo_hi
        if (hi >> 12) <= _MASK64:
            inside &= keys < np.uint64(hi >> 12)
        return int(np.count_nonzero(inside & occupied))

    def keys(self) -> list[int]:
        """Every stored key (for tests and tools; O(slots))."""
        return [(self._khi[i] << 12) | (t & _LOW12) for i, t in enumerate(self._tag) if t & _OCC]

    def columns(self) -> dict[str, np.ndarray]:
        """Copies of the occupied slots' columns (``khi``, ``tag``, ``ip``, ``born``, ``ttl``), for a compaction.

        ``ip`` is uint32 for IPv4 and an (n, 2) uint64 array (high, low) for IPv6.
        """
        occ = (np.frombuffer(self._tag, dtype=np.uint16) & _OCC) != 0
        ip = (
            np.frombuffer(self._ip, dtype=np.uint64).reshape(-1, 2)
            if self._ipv6
            else np.frombuffer(self._ip, dtype=np.uint32)
        )
        return {
            "khi": np.frombuffer(self._khi, dtype=np.uint64)[occ].copy(),
            "tag": np.frombuffer(self._tag, dtype=np.uint16)[occ].copy(),
            "ip": ip[occ].copy(),
            "born": np.frombuffer(self._born, dtype=np.uint32)[occ].copy(),
            "ttl": np.frombuffer(self._ttl, dtype=np.uint16)[occ].copy(),
        }

    def extras(self) -> dict[int, bytes]:
        """The packed extra addresses of multi-address entries, by key (shared, not copied)."""
        return self._extra

    def clear(self) -> None:
        """Empty the table in place (no reallocation)."""
        for a in (self._khi, self._tag, self._born, self._ttl, self._ip):
            np.frombuffer(a, dtype=np.uint8)[:] = 0
        self._extra = {}
        self._size = 0
        self._hand = 0

    def evict_one(self) -> None:
        """Evict one entry by CLOCK (the table must not be empty)."""
        if self._size:
            self._evict_one()

    # -- internals -----------------------------------------------------------------------------
    def _read_ip(self, i: int) -> int:
        if self._ipv6:
            return (self._ip[2 * i] << 64) | self._ip[2 * i + 1]
        return self._ip[i]

    def _write_ip(self, i: int, value: int) -> None:
        if self._ipv6:
            self._ip[2 * i] = value >> 64
            self._ip[2 * i + 1] = value & _MASK64
        else:
            self._ip[i] = value

    def _move(self, src: int, dst: int) -> None:
        self._khi[dst] = self._khi[src]
        self._tag[dst] = self._tag[src]
        if self._ipv6:
            self._ip[2 * dst] = self._ip[2 * src]
            self._ip[2 * dst + 1] = self._ip[2 * src + 1]
        else:
            self._ip[dst] = self._ip[src]
        self._born[dst] = self._born[src]
        self._ttl[dst] = self._ttl[src]

    def _remove_at(self, i: int) -> None:
        """Empty slot ``i`` and shift later members of its probe run back (linear-probing delete)."""
        tag, keys, m = self._tag, self._khi, self._m
        if tag[i] & _EXTRA:
            self._extra.pop((keys[i] << 12) | (tag[i] & _LOW12), None)
        j = i
        while True:
            j += 1
            if j == m:
                j = 0
            t = tag[j]
            if not t & _OCC:
                break
            home = self._home(keys[j], t & _LOW12)
            # The entry at j may stay if its home lies cyclically in (i, j].
            if (i < j and i < home <= j) or (i > j and (home > i or home <= j)):
                continue
            self._move(j, i)
            i = j
        tag[i] = 0
        self._size -= 1

    def _evict_one(self) -> None:
        """CLOCK: sweep the hand, clearing reference bits, and evict the first unreferenced entry."""
        tag, m, h = self._tag, self._m, self._hand
        while True:
            t = tag[h]
            if t & _OCC:
                if t & _REF:
                    tag[h] = t & ~_REF
                else:
                    self._remove_at(h)
                    self._hand = h
                    self.evictions += 1
                    return
            h += 1
            if h == m:
                h = 0
