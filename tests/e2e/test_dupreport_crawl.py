"""The duplicate report on a real crawl (#23 point 3): an embedded crawl of the testbed, then
``crawlfleet duplicates CRAWL_DIR --json`` (and ``--write``, shown by ``crawlfleet report``). The testbed's leaf pages of one host whose paths have the same
length share their filler text and links and differ only in their title line (``render._leaf``: the filler
is seeded by len(path) + host), so each such family must come out as near-duplicates, and not as byte-
identical ones: /r/0../r/2 (stored under the redirect's URL), /slow and /gzip, /private/0../private/2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.harness.testbed.harness import TestbedProcess

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_near_duplicate_families_of_the_testbed_are_reported(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with TestbedProcess(3, 10, seed=3, workdir=tmp_path / "tb") as tb:
        crawl = [sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out),
                 "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
                 "--max-depth", "2", "--host-delay", "0.02", "--json", "--no-progress"]  # fmt: skip
        subprocess.run(crawl, capture_output=True, text=True, timeout=180, cwd=ROOT, check=True)
        families = [
            {tb.url(0, f"/r/{k}") for k in range(3)},
            {tb.url(1, "/slow"), tb.url(1, "/gzip")},
            {tb.url(2, f"/private/{k}") for k in range(3)},
        ]
    report = [sys.executable, "-m", "pipeline.cli", "duplicates", str(out), "--near-bits", "3", "--json"]
    data = json.loads(
        subprocess.run(report, capture_output=True, text=True, timeout=120, cwd=ROOT, check=True).stdout
    )
    assert data["pages"] > 20
    near = [set(g) for g in data["near"]]
    for family in families:
        assert any(family <= g for g in near), (sorted(family), data["near"])
    exact = [set(g) for g in data["exact"]]
    assert not any(len(family & g) > 1 for family in families for g in exact), (
        "titles differ: not byte-identical"
    )
    exact_only = [sys.executable, "-m", "pipeline.cli", "duplicates", str(out), "--near-bits", "0", "--json"]
    quiet = json.loads(
        subprocess.run(exact_only, capture_output=True, text=True, timeout=120, cwd=ROOT, check=True).stdout
    )
    assert quiet["near_groups"] == 0 and quiet["exact_groups"] == data["exact_groups"]
    # --write puts the result in the crawl directory; `crawlfleet report` shows it as a section.
    subprocess.run([*report, "--write"], capture_output=True, text=True, timeout=120, cwd=ROOT, check=True)
    build = [sys.executable, "-m", "pipeline.cli", "report", str(out), "--out", str(tmp_path / "report")]
    subprocess.run(build, capture_output=True, text=True, timeout=300, cwd=ROOT, check=True)
    shown = json.loads((tmp_path / "report" / "report.json").read_text())["duplicates"]
    assert shown["near"] == data["near"] and shown["near_bits"] == 3
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Duplicate content" in page and page.count("<td>near</td>") == min(20, len(data["near"]))
