"""S2's negative cache: a Bloom filter (rbloom) of names that failed, cleared wholesale every TTL.

A Bloom filter cannot delete one item, so S2 expires the whole filter on one uniform TTL: a failure
recorded at time ``t`` is remembered until the next clear, i.e. for at most ``ttl_s``. The filter is
sized for ``capacity`` items at ``fp_rate``; a false positive makes a good name look failed until
the next clear, so the rate is a setting.

A flood of failing names (an NXDOMAIN flood, a random-subdomain attack) would push the filter past
``capacity``, where its false-positive rate climbs towards 1 and good names start to look failed:
the filter is therefore also cleared early when ``capacity`` names were added since the last clear
(``flood_clears`` counts those). The flood costs re-asking some failed names, never a good name.

Items are ``"<family>:<name>"``, one filter probe per look-up. The filter only answers "failed
recently"; the kind of failure is kept in a small bounded dict of the most recent failures so that
a cached error still says nxdomain or timeout. When that dict has forgotten a name (or on a false
positive) the kind reported is ``"nxdomain"``.
"""

from __future__ import annotations

import socket
from collections import OrderedDict
from collections.abc import Callable

from rbloom import Bloom

_LABELS_MAX = 65_536


def _item(name: str, family: int) -> str:
    return f"{6 if family == socket.AF_INET6 else 4}:{name}"


class NegativeCache:
    """Names that failed to resolve, forgotten all at once every ``ttl_s`` seconds of ``clock``."""

    __slots__ = (
        "_bloom",
        "_capacity",
        "_clock",
        "_epoch",
        "_kinds",
        "_labels_max",
        "added",
        "clears",
        "flood_clears",
        "ttl_s",
    )

    def __init__(
        self,
        *,
        capacity: int,
        fp_rate: float,
        ttl_s: float,
        clock: Callable[[], float],
        labels_max: int = _LABELS_MAX,
    ) -> None:
        if capacity < 1 or not 0.0 < fp_rate < 1.0 or ttl_s <= 0:
            raise ValueError("need capacity >= 1, 0 < fp_rate < 1 and ttl_s > 0")
        self._bloom = Bloom(capacity, fp_rate)
        self._capacity = capacity
        self.added = 0  # since the last clear
        self.flood_clears = 0
        self._clock = clock
        self._epoch = clock()
        self._kinds: OrderedDict[str, str] = OrderedDict()
        self._labels_max = labels_max
        self.ttl_s = ttl_s
        self.clears = 0

    def _expire(self) -> None:
        now = self._clock()
        if now - self._epoch >= self.ttl_s:
            self._bloom.clear()
            self._kinds.clear()
            self.added = 0
            self.clears += 1
            # Align to the period so clears stay periodic however rarely the cache is used.
            self._epoch = now - ((now - self._epoch) % self.ttl_s)

    def add(self, name: str, family: int, kind: str) -> None:
        """Record that ``name`` failed for ``family`` with ``kind``."""
        self._expire()
        if self.added >= self._capacity:  # full: past here the false-positive rate is not the one asked
            self._bloom.clear()
            self._kinds.clear()
            self.added = 0
            self.flood_clears += 1
        item = _item(name, family)
        self._bloom.add(item)
        self.added += 1
        self._kinds[item] = kind
        self._kinds.move_to_end(item)
        if len(self._kinds) > self._labels_max:
            self._kinds.popitem(last=False)

    def get(self, name: str, family: int) -> str | None:
        """The failure kind if ``name`` failed since the last clear (or is a false positive), else None."""
        self._expire()
        item = _item(name, family)
        if item not in self._bloom:
            return None
        return self._kinds.get(item, "nxdomain")

    def size_bytes(self) -> int:
        return self._bloom.size_in_bits // 8

    @staticmethod
    def size_for(capacity: int, fp_rate: float) -> int:
        """Bytes rbloom allocates for ``capacity`` items at ``fp_rate`` (builds a filter to ask it)."""
        return Bloom(capacity, fp_rate).size_in_bits // 8
