"""The embedded crawl's items: ``OUT/items/items-NNNNN.jsonl``, rotated by size, committed with the journal.

Items are appended as the crawl core applies each page (one ``os.write`` per page, no user-space buffer,
as the journal is), so a SIGKILL of the crawl loses none that ``commit`` covered. ``commit(position)``
runs at every journal checkpoint, before the store learns of it: it writes ``items.commit`` (whole, by a
rename) naming the item file, its size, and the journal position below which every page's items are in
the files. On open:

* the committed file is cut back to its committed size (a torn or uncommitted tail goes), and later item
  files are removed: they hold items of pages past the commit only;
* ``committed`` is that journal position. The crawl replays the journal from the store's checkpoint, which
  is never past it: a replayed page below ``committed`` already has its items, a page at or past it gets
  them again (``pipeline.crawl.pageitems``). So every page version has exactly one item set, whatever
  moment a kill -9 chose.

Parquet (``plugins.items_format``): each JSONL file, once closed, becomes ``items-NNNNN.parquet`` on a
thread of its own (``itemfiles.parquet_bytes``); with "parquet" alone its JSONL file is removed after.
A file closed but not converted when the crawl stopped is converted when the crawl resumes or ends.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from pathlib import Path

from pipeline.storage.itemfiles import parquet_bytes
from pipeline.storage.journal import Checkpoint

log = logging.getLogger(__name__)

COMMIT = "items.commit"


def _index(path: Path) -> int:
    return int(path.stem.split("-")[1])


class ItemLog:
    """Append-only item files of one crawl directory (see the module docstring). Used from one thread."""

    def __init__(self, directory: Path, *, max_bytes: int = 64 << 20, fmt: str = "jsonl") -> None:
        self.directory, self.max_bytes, self.fmt = directory, max_bytes, fmt
        directory.mkdir(parents=True, exist_ok=True)
        self.committed: Checkpoint | None = None
        self._converters: list[threading.Thread] = []
        index, size = self._recover()
        self._fd = -1
        self._open(index, size)
        self.written = 0  # items' bytes this run

    def _recover(self) -> tuple[int, int]:
        """Cut the files back to the last commit; the (index, size) to append at."""
        index, size = 0, 0
        try:
            obj = json.loads((self.directory / COMMIT).read_text(encoding="utf-8"))
            index, size = int(obj["index"]), int(obj["size"])
            self.committed = Checkpoint.decode(obj.get("journal"))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        if not self._path(index, ".jsonl").exists() and self._path(index, ".parquet").exists():
            index, size = index + 1, 0  # closed and converted at the end of a run, killed before its commit
        for path in self._files(".jsonl") + self._files(".parquet"):
            if _index(path) > index or (_index(path) == index and path.suffix == ".parquet"):
                path.unlink()  # past the commit, or the Parquet twin of the file appended to again
        current = self._path(index, ".jsonl")
        if current.exists() and current.stat().st_size > size:
            with open(current, "r+b") as fh:
                fh.truncate(size)
        self._convert_closed(below=index)
        return index, size

    def _files(self, suffix: str) -> list[Path]:
        return sorted(self.directory.glob(f"items-*{suffix}"))

    def _path(self, index: int, suffix: str) -> Path:
        return self.directory / f"items-{index:05d}{suffix}"

    def _open(self, index: int, size: int) -> None:
        self._index = index
        self._fd = os.open(self._path(index, ".jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = max(size, os.fstat(self._fd).st_size)

    def write(self, lines: bytes) -> None:
        """Append one page's item lines (a whole number of lines)."""
        if not lines:
            return
        if self._size >= self.max_bytes:
            self._rotate()
        view = memoryview(lines)
        while view:
            view = view[os.write(self._fd, view) :]
        self._size += len(lines)
        self.written += len(lines)

    def _rotate(self) -> None:
        os.close(self._fd)
        closed = self._index
        self._open(closed + 1, 0)
        if self.fmt != "jsonl":
            self._convert_soon(closed)

    def commit(self, journal: Checkpoint) -> None:
        """Every page journaled below ``journal`` has its items in the files: write that down (whole)."""
        tmp = self.directory / f".{COMMIT}.tmp"
        tmp.write_text(json.dumps({"index": self._index, "size": self._size, "journal": journal.encode()}))
        os.replace(tmp, self.directory / COMMIT)
        self.committed = journal

    # --- Parquet -------------------------------------------------------------------------------------
    def _convert_soon(self, index: int) -> None:
        thread = threading.Thread(target=self._convert, args=(index,), name="items-parquet", daemon=True)
        thread.start()
        self._converters.append(thread)

    def _convert_closed(self, *, below: int) -> None:
        if self.fmt == "jsonl":
            return
        for path in self._files(".jsonl"):
            if _index(path) < below and not self._path(_index(path), ".parquet").exists():
                self._convert(_index(path))
            elif _index(path) < below and self.fmt == "parquet":
                path.unlink()  # converted before a kill took the crawl between the rename and this unlink

    def _convert(self, index: int) -> None:
        src, dest = self._path(index, ".jsonl"), self._path(index, ".parquet")
        try:
            with open(src, "rb") as fh:
                data = parquet_bytes(fh)
            tmp = dest.with_name(f".{dest.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, dest)
            if self.fmt == "parquet":
                src.unlink()
        except Exception:  # the JSONL file stays: nothing is lost, the conversion is tried again on resume
            log.exception("items: converting %s to Parquet failed", src.name)

    def close(self) -> None:
        """Close the open file; with Parquet, convert it too and commit past it (a resume opens a new one)."""
        if self._fd < 0:
            return
        os.close(self._fd)
        self._fd = -1
        for thread in self._converters:
            thread.join()
        if self.fmt != "jsonl" and self._size > 0:
            self._convert(self._index)
            if self.committed is not None:
                self._index, self._size = self._index + 1, 0
                self.commit(self.committed)
        elif self._size == 0:
            with contextlib.suppress(OSError):
                self._path(self._index, ".jsonl").unlink()
