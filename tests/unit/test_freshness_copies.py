"""The freshness bench dates a stored copy by the store's page body, not by the re-crawl record alone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pipeline.harness.bench.freshrun import _copies


def _db(path: Path) -> None:
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE urls (url_id INTEGER PRIMARY KEY, url TEXT);"
        "CREATE TABLE pages (url_id INTEGER PRIMARY KEY, fetched_at REAL);"
        "CREATE TABLE revisits (url_id INTEGER PRIMARY KEY, fetched_at REAL, digest TEXT);"
        "INSERT INTO urls VALUES (1, 'http://a/p/1'), (2, 'http://a/p/2'), (3, 'http://a/p/3');"
        # 1: re-fetched and stored at 20, its record (written a link round later) still says 10
        # 2: found unchanged at 30 (a 304: the body stored at 5 stays); 3: stored, no record yet
        "INSERT INTO pages VALUES (1, 20.0), (2, 5.0), (3, 7.0);"
        "INSERT INTO revisits VALUES (1, 10.0, 'd1'), (2, 30.0, 'd2');"
    )
    con.commit()
    con.close()


def test_copies_take_the_later_of_the_body_and_the_record(tmp_path: Path) -> None:
    _db(tmp_path / "crawl.db")
    stored, recorded = _copies(tmp_path / "crawl.db")
    assert {c.url: c.fetched_at for c in stored} == {"http://a/p/1": 20.0, "http://a/p/2": 30.0, "http://a/p/3": 7.0}
    assert {c.url: c.fetched_at for c in recorded} == {"http://a/p/1": 10.0, "http://a/p/2": 30.0}


def test_no_database_yet_is_no_copies(tmp_path: Path) -> None:
    assert _copies(tmp_path / "missing.db") == ([], [])
