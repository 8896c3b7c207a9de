"""Append-only segment files for page bodies, beside the SQLite crawl database.

Why not BLOBs in SQLite: a 20 KB body is five 4 KiB WAL frames, each written and checksummed
separately at commit and copied again at checkpoint. Measured on our 2-core machines that made the
commit of 100 pages cost ~90 us per page, most of the store's budget. Here a whole batch of bodies is
one ``writev`` (and no second copy); SQLite keeps only ``(segment, offset, length)``.

Contracts:
- ``append`` returns once the bytes are in the OS page cache, so a body whose reference is committed
  afterwards survives a kill of the process (the same guarantee as WAL with synchronous=NORMAL);
  ``sync`` makes them survive a power cut too.
- A crash between ``append`` and the commit of the references leaves unreferenced bytes, never a
  reference to missing bytes. Segments are never rewritten.
- One writer process per directory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

_IOV_MAX = 1024  # Linux's limit on buffers per writev


class BodyLog:
    """Segments ``NNNNNNNN.seg`` in ``directory``; a new one starts past ``segment_bytes``."""

    def __init__(self, directory: str | Path, *, segment_bytes: int = 1 << 30) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._limit = segment_bytes
        existing = sorted(int(p.stem) for p in self.directory.glob("*.seg") if p.stem.isdigit())
        self._segment = existing[-1] if existing else 1
        self._fd = -1
        self._size = 0
        self._open_segment(self._segment)
        self._readers: dict[int, int] = {}

    def _open_segment(self, segment: int) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._segment = segment
        path = self.directory / f"{segment:08d}.seg"
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size

    def append(self, bodies: Sequence[bytes]) -> list[tuple[int, int, int]]:
        """Write ``bodies`` in order; return each one's ``(segment, offset, length)``."""
        if self._size >= self._limit:
            self._open_segment(self._segment + 1)
        refs: list[tuple[int, int, int]] = []
        # The file's real end, not a remembered one: stays right after a failed or partial write.
        offset = self._size = os.fstat(self._fd).st_size
        for body in bodies:
            refs.append((self._segment, offset, len(body)))
            offset += len(body)
        for start in range(0, len(bodies), _IOV_MAX):
            chunk = [b for b in bodies[start : start + _IOV_MAX] if b]
            want = sum(map(len, chunk))
            done = os.writev(self._fd, chunk) if chunk else 0
            if done != want:  # a short write (signal, huge batch): finish it byte-exactly
                rest = memoryview(b"".join(chunk))[done:]
                while rest:
                    rest = rest[os.write(self._fd, rest) :]
        self._size = offset
        return refs

    def read(self, segment: int, offset: int, length: int) -> bytes:
        fd = self._readers.get(segment)
        if fd is None:
            fd = self._readers[segment] = os.open(self.directory / f"{segment:08d}.seg", os.O_RDONLY)
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise OSError(f"body segment {segment} truncated at {offset}+{length}")
        return data

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        for fd in (self._fd, *self._readers.values()):
            if fd >= 0:
                os.close(fd)
        self._fd = -1
        self._readers.clear()
