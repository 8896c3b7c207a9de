"""The embedded default crawling the testbed's https web (its own CA, trusted through fetch.tls_ca_bundle
only), with http seeds that redirect to https and two bad-certificate hosts; judged from the testbed's
access log (tests/fixtures/tlsweb.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from tests.fixtures.tlsweb import check_bad_certs_recorded, check_https_truth, seeds

pytestmark = pytest.mark.e2e
MAX_DEPTH = 12


# asyncio's loop (fetch.event_loop), and uvloop with two fetch processes that run on it too (every other
# embedded test runs on the default, auto: uvloop with parse processes).
LOOPS = {"asyncio": {"CRAWLFLEET_FETCH_EVENT_LOOP": "asyncio"},
         "uvloop": {"CRAWLFLEET_FETCH_EVENT_LOOP": "uvloop", "CRAWLFLEET_FETCH_PROCESSES": "2"}}


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_embedded_https_crawl_matches_ground_truth(loop: str, tmp_path: Path) -> None:
    with TestbedProcess(12, 30, seed=8, tls=True, plain_http="redirect", workdir=tmp_path / "tb") as tb:
        out = tmp_path / "out"
        cmd = [sys.executable, "-m", "pipeline.cli", "crawl", *seeds(tb), "--out", str(out), "--dns-server",
               tb.dns_server, "--allow-network", "127.0.10.0/24", "--max-depth", str(MAX_DEPTH),
               "--host-delay", "0.02", "--json", "--no-progress"]  # fmt: skip
        env = {**os.environ, "CRAWLFLEET_FETCH_TLS_CA_BUNDLE": tb.ca_file, **LOOPS[loop]}
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        check_https_truth(tb, tb.truth(max_depth=MAX_DEPTH, scheme="https"), nodes=1)
        check_bad_certs_recorded(out / "crawl.db", tb)
        assert summary["errors_by_class"].get("tls_cert_expired") == 1, summary
        assert summary["event_loop"] == loop
