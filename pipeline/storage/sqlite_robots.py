"""robots.txt answers shared through a SQLite file beside the crawl db (``fetchers.robots.RobotsShare``), as
``hbase_robots`` shares them through HBase: for the nodes of a SQLite fleet (one machine, one crawl db) and
the embedded crawl's fetch processes, so that a host's robots.txt is fetched once, not once per process.

The file is ``crawl.db.robots``, not a table of the crawl db: it is a cache of the sites' own answers, so
it never takes the crawl db's write lock from the crawl's writer, and losing it costs only the fetches it
saved. One row per origin, overwritten by the newest answer (a host's lease keeps one process on it at a
time; two answers at once are both the site's own).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from fetchers.robots import MAX_ROBOTS_BYTES, SharedAnswer
from pipeline.storage.factory import sqlite_path
from pipeline.storage.sqlite_tx import BUSY_TIMEOUT_S

SUFFIX = ".robots"
_TABLE = "CREATE TABLE IF NOT EXISTS robots (origin TEXT PRIMARY KEY, status INTEGER NOT NULL, fetched_at REAL NOT NULL, body BLOB NOT NULL)"  # noqa: E501


def share_path(db: str | Path) -> Path:
    """The share's file for the crawl db ``db`` (a file, or a directory holding ``crawl.db``)."""
    path = sqlite_path(db)
    return path.with_name(path.name + SUFFIX)


class SqliteRobotsShare:
    """A ``RobotsShare`` over its own connection to the file ``path`` (``share_path``; made if missing);
    callable from any thread (a lock keeps the connection to one at a time). Every call is its own
    transaction (autocommit)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")  # readers in other processes never wait on a writer
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_TABLE)

    def get_robots(self, origin: str) -> SharedAnswer | None:
        with self._lock:
            row = self._db.execute("SELECT status, body, fetched_at FROM robots WHERE origin = ?", (origin,)).fetchone()
        return None if row is None else SharedAnswer(int(row[0]), bytes(row[1]), float(row[2]))

    def put_robots(self, origin: str, answer: SharedAnswer) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO robots (origin, status, fetched_at, body) VALUES (?, ?, ?, ?)",
                             (origin, answer.status, answer.fetched_at, answer.body[:MAX_ROBOTS_BYTES]))  # fmt: skip

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_share(spec: str) -> SqliteRobotsShare | None:
    """The share for a ``sqlite:PATH`` store spec; None for any other spec."""
    if not spec.startswith("sqlite:"):
        return None
    return SqliteRobotsShare(share_path(spec.removeprefix("sqlite:")))
