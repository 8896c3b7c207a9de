"""Download serial ids (S1): strictly increasing, and never reused across a dispatcher restart.

Ids are reserved durably in blocks through ``reserve(n) -> range`` (the Store's ``reserve_serials``),
then handed out from memory. A restart loses the unused tail of the current block, never reuses it:
the store only ever reserves above every id it reserved before. One durable write per ``block`` ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class SerialError(RuntimeError):
    """The reserve callback broke its contract (a range not strictly above the ids already issued)."""


class SerialAllocator:
    """Hands out strictly increasing serial ids from durably reserved blocks."""

    def __init__(self, reserve: Callable[[int], range], *, block: int = 1024) -> None:
        if block < 1:
            raise ValueError("block must be >= 1")
        self._reserve = reserve
        self._block = block
        self._current: range = range(0)
        self._pos = 0
        self._last = 0  # 0 = nothing issued by this allocator yet
        self.first: int | None = None  # the first id issued by this allocator (ids below are pre-restart)

    def next(self) -> int:
        if self._pos >= len(self._current):
            block = self._reserve(self._block)
            if len(block) < 1 or block.step != 1 or block.start <= self._last:
                raise SerialError(f"reserve({self._block}) returned {block!r} after id {self._last}")
            self._current, self._pos = block, 0
        serial = self._current[self._pos]
        self._pos += 1
        self._last = serial
        if self.first is None:
            self.first = serial
        return serial

    @property
    def last(self) -> int:
        """The last id issued by this allocator, 0 before the first."""
        return self._last


@dataclass(slots=True)
class MemorySerialStore:
    """An in-memory ``reserve_serials`` for the simulation and tests (a real Store persists ``high``)."""

    high: int = 0  # every id <= high has been reserved
    calls: int = 0

    def reserve_serials(self, n: int) -> range:
        if n < 1:
            raise ValueError("n must be >= 1")
        self.calls += 1
        block = range(self.high + 1, self.high + 1 + n)
        self.high += n
        return block
