"""The freshness bench dates a stored copy by when the store's page body was fetched, not by what the crawler
concluded since (a 304, the same digest) nor by its re-crawl record."""

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


def test_copies_are_dated_by_their_body(tmp_path: Path) -> None:
    _db(tmp_path / "crawl.db")
    bodies, confirmed, recorded = _copies(tmp_path / "crawl.db")
    # 2's 304 at 30 keeps the body of 5: on a host whose validators lie that body is stale, so it counts as of 5
    assert {c.url: c.fetched_at for c in bodies} == {"http://a/p/1": 20.0, "http://a/p/2": 5.0, "http://a/p/3": 7.0}
    assert {c.url: c.fetched_at for c in confirmed} == {"http://a/p/1": 20.0, "http://a/p/2": 30.0, "http://a/p/3": 7.0}
    assert {c.url: c.fetched_at for c in recorded} == {"http://a/p/1": 10.0, "http://a/p/2": 30.0}


def test_no_database_yet_is_no_copies(tmp_path: Path) -> None:
    assert _copies(tmp_path / "missing.db") == ([], [], [])
