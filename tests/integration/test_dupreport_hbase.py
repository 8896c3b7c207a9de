"""The duplicate-content report from a real HBase store (#23 point 3): the same groups as from SQLite, and
through the command's ``--store hbase://HOST:PORT/PREFIX``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.dupreport import store_report
from pipeline.storage.hbase import HBaseStore
from pipeline.storage.sqlite import SqliteStore
from tests.unit.test_dupreport import PAGES, _fill

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_hbase_and_sqlite_give_the_same_duplicate_groups(
    hbase_thrift: tuple[str, int], hbase_prefix: str, tmp_path: Path
) -> None:
    host, port = hbase_thrift
    prefix = f"{hbase_prefix}dup"
    hb = HBaseStore(host, port, prefix=prefix)
    lite = SqliteStore(tmp_path / "crawl.db")
    try:
        _fill(hb, PAGES)
        _fill(lite, PAGES)
        from_hbase, from_sqlite = store_report(hb, near_bits=3), store_report(lite, near_bits=3)
    finally:
        hb.close()
        lite.close()
    assert from_hbase == from_sqlite
    assert from_hbase.exact == [["http://a.test/x", "http://b.test/copy-of-x"]]
    assert from_hbase.near == [["http://a.test/x", "http://a.test/x-dated", "http://b.test/copy-of-x"]]
    cmd = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "duplicates",
        "--store",
        f"hbase://{host}:{port}/{prefix}",
        "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, check=True).stdout
    data = json.loads(out)
    assert (data["pages"], data["exact_groups"], data["near_groups"]) == (5, 1, 1)
