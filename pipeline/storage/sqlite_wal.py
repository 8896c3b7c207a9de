"""Keeping the SQLite store's write-ahead log short from a second thread (see ``pipeline.storage.sqlite``)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` every ``interval`` seconds on its own connection.

    PASSIVE never waits for the writer and never blocks it; SQLite releases the GIL while it copies
    and fsyncs, so this costs the writer thread nothing but a share of a second core.
    """

    def __init__(self, path: Path, interval: float) -> None:
        self._stop = threading.Event()
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout=1000")
        self._interval = interval
        self._thread = threading.Thread(target=self._run, name=f"sqlite-checkpoint:{path.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:  # a busy or closing database: the next round retries
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._db.close()
