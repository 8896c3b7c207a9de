"""The suite's recorded results: one JSON line per fault trial or hostile input, read by scripts/reliability.py.

Records go to ``var/reliability/results.jsonl`` (``CRAWLFLEET_RELIABILITY_RESULTS`` overrides the path).
Each carries ``run``, an id shared by every record of one test session (``CRAWLFLEET_RELIABILITY_RUN``
or the time this module was first imported), so the report can show the latest run of each group.

Record types:
- ``fault``: component, action, seed, the trial's figures (pipeline.harness.faults.accounting.TrialAccount);
- ``hostile``: mode (embedded | fetcher), input, error_class, outcome, crawl_ok, peak_rss_mb;
- ``xfail``: a known bug a strict-xfail test pins down (component, test, reason).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.observe.machine import machine as _host_machine

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_PATH = ROOT / "var" / "reliability" / "results.jsonl"
RUN_ID = os.environ.get("CRAWLFLEET_RELIABILITY_RUN") or time.strftime("%Y%m%dT%H%M%S")


def results_path() -> Path:
    return Path(os.environ.get("CRAWLFLEET_RELIABILITY_RESULTS") or DEFAULT_PATH)


def machine() -> dict[str, Any]:
    return _host_machine()


def append(record: dict[str, Any], *, path: Path | None = None) -> dict[str, Any]:
    """Append one record (``run`` and ``t`` are added); one ``write`` per line, so concurrent writers interleave whole lines."""
    out = {"run": RUN_ID, "t": round(time.time(), 3), "machine": machine(), **record}
    target = path or results_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(out, sort_keys=True, default=str) + "\n").encode()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return out


def read(path: Path | None = None) -> Iterator[dict[str, Any]]:
    target = path or results_path()
    if not target.exists():
        return
    with open(target, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue


def pin(component: str, test: str, reason: str, *, file: str) -> None:
    """Record the xfail test that pins a known bug (the report lists it while the marker stays)."""
    append({"type": "xfail", "component": component, "test": test, "reason": reason, "file": file})
