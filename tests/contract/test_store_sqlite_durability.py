"""SQLite durability: what a call committed survives a SIGKILL of the process, and a kill at any
moment leaves a consistent store (counters match the rows, every page's body is readable)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from pipeline.storage.base import UrlRecord, UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint, host_of

CHILD = r"""
import sys, time
from pipeline.storage.base import Outcome, PageRecord, UrlRecord, UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint, host_of
store = SqliteStore(sys.argv[1])
pause = sys.argv[2] == "pause"
for b in range(10_000):
    urls = [f"http://h{i % 5}.test/{b}/{i}" for i in range(40)]
    store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 1) for u in urls])
    outs = [Outcome(u, fingerprint(u), UrlState.DONE, 200, 1.0,
                    page=PageRecord(u, fingerprint(u), u, 200, "text/html", u.encode() * 300, 1.0))
            for u in urls[:30]]
    store.record_results(outs)
    print(f"committed {b}", flush=True)
    if pause and b == 4:
        time.sleep(3600)
"""


def run_child(db: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(db), mode], stdout=subprocess.PIPE, text=True)


def check_consistent(db: Path) -> dict[str, int]:
    store = SqliteStore(db)
    try:
        counts = store.counts()
        pages = list(store.iter_pages())
        assert counts["pages"] == len(pages)
        for p in pages:
            assert p.body == p.url.encode() * 300
            rec = store.get_url(p.url)
            assert rec is not None and rec.state == UrlState.DONE
        pending = sum(n for _, n in store.pending_hosts())
        assert counts["pending"] == pending
        assert counts["done"] == len(pages)
        return counts
    finally:
        store.close()


def test_committed_calls_survive_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "crawl.db"
    child = run_child(db, "pause")
    assert child.stdout is not None
    for _ in range(5):
        line = child.stdout.readline()
    assert line.strip() == "committed 4"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    counts = check_consistent(db)
    assert (counts["done"], counts["pages"], counts["pending"]) == (150, 150, 50)


def test_a_kill_at_any_moment_leaves_a_consistent_store(tmp_path: Path) -> None:
    for attempt, delay in enumerate((0.7, 1.3, 2.1)):
        db = tmp_path / f"crawl{attempt}.db"
        child = run_child(db, "run")
        assert child.stdout is not None
        child.stdout.readline()  # started writing
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        counts = check_consistent(db)
        assert counts["done"] % 30 == 0 and counts["done"] > 0  # whole calls only


OPENER = r"""
import sys, time
from pipeline.storage.sqlite import SqliteStore
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # every opener starts at the same moment
SqliteStore(sys.argv[1]).close()
"""


def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    """mrjob's local runner and Spark open one new crawl database from several tasks at once. SQLite
    can refuse such an opener without waiting ("database is locked" where waiting could deadlock);
    the store must set itself up anyway (it failed in ~40% of 3-way races before)."""
    for round_ in range(8):
        db = tmp_path / f"race{round_}.db"
        start = time.time() + 1.0  # past the interpreters' start-up
        procs = [
            subprocess.Popen([sys.executable, "-c", OPENER, str(db), str(start)], stderr=subprocess.PIPE, text=True)
            for _ in range(3)
        ]
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], errors


def test_closing_while_another_process_holds_the_write_lock_succeeds(tmp_path: Path) -> None:
    """The close's housekeeping (optimize, checkpoint) yields to another writer; nothing committed is lost.

    A fleet dispatcher died closing its store: a link job committed between the read and the write of
    ``PRAGMA optimize``, which then fails at once without asking the busy handler. Here another
    connection holds the write lock and the store's busy wait is 0, the same immediate failure, made
    deterministic."""
    db = tmp_path / "crawl.db"
    store = SqliteStore(db)
    urls = [f"http://h{i % 20}.test/p{i}" for i in range(5000)]
    store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 1) for u in urls])
    for h in range(20):  # queries whose tables optimize then wants to ANALYZE
        store.pending(f"h{h}.test", 10)
    other = sqlite3.connect(str(db), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('other', 'writer')")
    store._db.execute("PRAGMA busy_timeout=0")  # the seam: fail at once, as the stale-snapshot case does
    store.close()
    other.execute("COMMIT")
    other.close()
    again = SqliteStore(db)
    try:
        assert again.counts()["pending"] == len(urls)
        assert again.get_meta("other") == "writer"
    finally:
        again.close()
