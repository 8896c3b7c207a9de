"""The duplicate-content report (#23 point 3): exact groups by digest, near groups by simhash, from a store."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from jobs.dupreport import duplicate_report, register, store_report
from pipeline.storage.base import Outcome, PageRecord, Store, UrlRecord, UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint, host_of


def _article(n: int, *, date: str = "2026-11-24") -> bytes:
    rnd = random.Random(n)  # a different text per article, the same for the same n
    text = " ".join("".join(rnd.choice("abcdefghijklmnop") for _ in range(5)) for _ in range(400))
    return f"<html><body><p>Updated {date}</p><p>{text}</p></body></html>".encode()


PAGES = {
    "http://a.test/x": _article(1),
    "http://b.test/copy-of-x": _article(1),  # byte-identical to a.test/x
    "http://a.test/x-dated": _article(1, date="2026-11-25"),  # same article, another date line: near
    "http://a.test/y": _article(2),
    "http://a.test/z": _article(3),
}


def _page(url: str, body: bytes, *, status: int = 200) -> PageRecord:
    return PageRecord(url, fingerprint(url), url, status, "text/html", body, 1.0)


def _fill(store: Store, pages: dict[str, bytes]) -> None:
    store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 0) for u in pages])
    store.record_results([Outcome(u, fingerprint(u), UrlState.DONE, status=200, fetched_at=1.0, page=_page(u, b))
                          for u, b in pages.items()])  # fmt: skip


def test_exact_and_near_groups() -> None:
    pages = [_page(u, b) for u, b in PAGES.items()] + [_page("http://a.test/gone", _article(1), status=404)]
    exact_only = duplicate_report(pages)
    assert exact_only.exact == [["http://a.test/x", "http://b.test/copy-of-x"]] and exact_only.near == []
    assert exact_only.pages == 5  # the 404 does not count
    rep = duplicate_report(pages, near_bits=3)
    assert rep.exact == exact_only.exact
    assert rep.near == [["http://a.test/x", "http://a.test/x-dated", "http://b.test/copy-of-x"]]
    data = rep.to_json()
    assert (data["exact_groups"], data["exact_urls"], data["near_groups"], data["near_urls"]) == (1, 2, 1, 3)


def test_report_from_a_sqlite_store_and_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = SqliteStore(tmp_path / "crawl.db")
    try:
        _fill(store, PAGES)
        assert store_report(store).exact == [["http://a.test/x", "http://b.test/copy-of-x"]]
    finally:
        store.close()
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["duplicates", str(tmp_path), "--near-bits", "3", "--json"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["exact_groups"] == 1 and out["near_groups"] == 1 and out["pages"] == 5
    bad = parser.parse_args(["duplicates", str(tmp_path / "nowhere")])
    assert bad.func(bad) == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["duplicates", str(tmp_path), "--near-bits", "64"])
