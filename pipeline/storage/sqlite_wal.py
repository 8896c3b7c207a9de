"""Keeping the SQLite store's write-ahead log short: from a second thread while it runs, and on closing
(see ``pipeline.storage.sqlite``)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from pipeline.storage.sqlite_tx import is_locked


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


def tidy_on_close(db: sqlite3.Connection) -> None:
    """``PRAGMA optimize`` and a TRUNCATE checkpoint, skipping either when the file is locked.

    Housekeeping only: every write is committed already, and the next close tries again. optimize may
    ANALYZE, a write that follows its own read, so a writer of another process (the link jobs, a node's
    sink) that commits in between fails it at once ("database is locked", the busy handler is never
    asked): a fleet dispatcher died of it while closing, after its crawl had ended cleanly.
    """
    for pragma in ("optimize", "wal_checkpoint(TRUNCATE)"):
        try:
            db.execute(f"PRAGMA {pragma}")
        except sqlite3.OperationalError as exc:
            if not is_locked(exc):
                raise
