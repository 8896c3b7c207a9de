"""The SQLite store's transaction helper, lock test and link-round marks, kept apart from ``sqlite.py``."""

from __future__ import annotations

import sqlite3
from typing import TypeVar

T = TypeVar("T")

# How long a writer waits for the write lock before "database is locked". In fleet mode every node's sink
# threads, the link jobs and the dispatcher write one file; SQLite's busy handler is not a queue, so on a
# loaded box one writer can lose the race for well over 10 s (a fleet dispatcher died of it mid-crawl in a loaded make test).
# Waiting costs nothing when the lock is free; failing kills the process that holds the crawl's state.
BUSY_TIMEOUT_S = 60.0


def is_locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


class Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error); nested use joins the outer one."""

    __slots__ = ("_db", "_outer")

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._outer = False

    def __enter__(self) -> None:
        self._outer = not self._db.in_transaction
        if self._outer:
            self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if not self._outer:
            return
        if exc_type is None:
            self._db.execute("COMMIT")
        else:
            self._db.execute("ROLLBACK")


# --- link rounds: in-links counted once per round, whatever the re-runs ------------------------------
# A link-jobs round killed inside its merge is run again from the same segments under the same round id;
# each URL's row here names the last round that counted its in-links, so the re-run skips those URLs.
# Its own table, created on first use: stores that never see a round (the embedded crawl) pay nothing.
LINK_ROUNDS_DDL = "CREATE TABLE IF NOT EXISTS link_rounds (id INTEGER PRIMARY KEY, round TEXT NOT NULL)"


def claim_round(db: sqlite3.Connection, round_id: str, items: list[tuple[int, T]]) -> list[tuple[int, T]]:
    """The ``(id, value)`` items whose in-links ``round_id`` has not counted yet, now marked as counted by
    it. Call inside the transaction that counts them, so a kill leaves both or neither."""
    done: set[int] = set()
    for start in range(0, len(items), 500):
        chunk = [uid for uid, _ in items[start : start + 500]]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT id FROM link_rounds WHERE round = ? AND id IN ({marks})"  # noqa: S608 - only "?" marks
        done.update(row[0] for row in db.execute(sql, [round_id, *chunk]))
    todo = [item for item in items if item[0] not in done]
    db.executemany(
        "INSERT OR REPLACE INTO link_rounds (id, round) VALUES (?, ?)", [(i, round_id) for i, _ in todo]
    )
    return todo
