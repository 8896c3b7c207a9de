"""Fixtures of the faults tier, and the hook that turns the session's recorded results into RELIABILITY.md.

Every trial appends one JSON record to var/reliability/results.jsonl (pipeline.harness.faults.results); when
the session ends, scripts/reliability.py writes var/reliability/RELIABILITY.md from the latest run of each group
(set CRAWLFLEET_RELIABILITY_REPORT=0 to skip that).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults import results
from pipeline.harness.faults.bed import Bed

ROOT = Path(__file__).resolve().parents[2]

# One small web for every trial of a module: 8 hosts x 25 pages, about 250 requests per crawl.
BED_HOSTS, BED_PAGES, BED_SEED = 8, 25, 5


@pytest.fixture(scope="module")
def fault_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    bed = Bed.start(BED_HOSTS, BED_PAGES, seed=BED_SEED, workdir=tmp_path_factory.mktemp("fault-bed"))
    try:
        yield bed
    finally:
        bed.close()


@pytest.fixture
def record() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Append a result record (also to the test's output, for -s runs)."""

    def add(rec: dict[str, Any]) -> dict[str, Any]:
        out = results.append(rec)
        print({k: rec.get(k) for k in ("component", "action", "seed", "lost", "repeats", "repeats_unexcused",
                                       "in_flight_at_fault", "in_flight_repeats", "recent_repeats", "robots_extra", "kills",
                                       "recovery_s")})  # fmt: skip
        return out

    return add


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CRAWLFLEET_RELIABILITY_REPORT", "1") == "0":
        return
    if not any(r.get("run") == results.RUN_ID for r in results.read()):
        return  # nothing recorded by this session
    # Into var/ (untracked): a test run must leave a clean clone clean. Publishing the table is a
    # deliberate step: scripts/reliability.py --out RELIABILITY.md.
    out = ROOT / "var" / "reliability" / "RELIABILITY.md"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "reliability.py"), "--out", str(out)], cwd=ROOT,
                   check=False, timeout=120)  # fmt: skip
