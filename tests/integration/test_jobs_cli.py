"""``crawlfleet jobs run`` as a user runs it: a segments directory, a store, one line per segment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.synth import make_results, write_segment
from pipeline.storage.sqlite import SqliteStore

pytestmark = pytest.mark.integration


def jobs_run(segs: Path, db: Path, work: Path, *extra: str) -> list[dict]:  # type: ignore[type-arg]
    cmd = [sys.executable, "-m", "pipeline.cli", "jobs", "run", "--runner", "inline", "--segments-dir", str(segs),
           "--store", f"sqlite:{db}", "--allowed-domain", "crawl.test", "--max-depth", "5",
           "--work-dir", str(work), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def test_jobs_run_processes_each_segment_once(tmp_path: Path) -> None:
    segs = tmp_path / "segments"
    for i in range(2):
        write_segment(segs / f"segment-{i:05d}.jsonl", make_results(20, hosts=2, page_bytes=2000, seed=i))
    db = tmp_path / "crawl.db"
    first = jobs_run(segs, db, tmp_path / "work")
    assert [r["segment"] for r in first] == ["segment-00000.jsonl", "segment-00001.jsonl"]
    with SqliteStore(db) as store:
        assert store.counts()["pending"] == sum(r["new_pending"] for r in first) > 0
    assert jobs_run(segs, db, tmp_path / "work") == []  # the store remembers processed segments
    again = jobs_run(segs, db, tmp_path / "work", "--reprocess")
    assert [r["new_pending"] for r in again] == [0, 0]
