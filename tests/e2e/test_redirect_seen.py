"""Redirect targets go through the crawl's seen-set and scope before they are fetched (issue #22, 5).
Judged from the testbed's access log.

The testbed's redirect pages (a host with the ``redirects`` feature): ``/r/k`` -> ``/r2/k`` ->
``/moved/k`` (a page), ``/loop/a`` -> ``/loop/b`` -> ``/loop/a``. The crawl is seeded with the chains'
start *and* some of their targets, at depth 0, so every target is known before any chain runs:

- ``/r/0`` and ``/moved/0``: the chain stops at the known ``/moved/0``, which is fetched once;
- ``/loop/a`` and ``/loop/b``: each is fetched once, neither chain repeats the other's request;
- ``/r/1`` alone: its chain's URLs are fetched once each.

Without the seen-set check ``/moved/0``, ``/loop/a`` and ``/loop/b`` are each requested twice. Run
with the fetcher in the crawl's process (it asks the crawl's gate before a hop), in a fetch process
(which never follows: the target goes through the link path), and with the threaded fetcher.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.sqlite import SqliteStore

pytestmark = pytest.mark.e2e

CHAINS = ("/r/0", "/r2/0", "/moved/0", "/loop/a", "/loop/b", "/r/1", "/r2/1", "/moved/1")


def redirect_host(tb: TestbedProcess) -> int:
    truth = tb.truth(max_depth=1)
    allowed = set(truth["fetch_urls"])
    for i in range(tb.web.hosts):
        if tb.web.features(i).redirects and tb.url(i, "/r/0") in allowed and tb.url(i, "/loop/a") in allowed:
            return i
    raise AssertionError("no host with redirect pages that robots.txt allows")


@pytest.mark.parametrize("mode", ["in-process", "fetch-process", "threaded"])
def test_a_known_redirect_target_is_not_fetched_again(tmp_path: Path, mode: str) -> None:
    with TestbedProcess(8, 6, seed=3, workdir=tmp_path / "tb") as tb:
        i = redirect_host(tb)
        seeds = [tb.url(i, p) for p in ("/r/0", "/moved/0", "/loop/a", "/loop/b", "/r/1")]
        out = tmp_path / "out"
        cmd = [sys.executable, "-m", "pipeline.cli", "crawl", *seeds, "--out", str(out),
               "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
               "--max-depth", "0", "--host-delay", "0.01", "--json", "--no-progress"]  # fmt: skip
        if mode == "threaded":
            cmd += ["--fetcher", "threaded"]
        env = dict(os.environ, CRAWLFLEET_FETCH_PROCESSES="1" if mode == "fetch-process" else "0")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        tb.wait_log_flush()
        host = tb.url(i, "/").split("//")[1].split(":")[0]
        counts = collections.Counter(e["path"] for e in tb.read_access_log() if e["host"] == host)
    assert {p: counts[p] for p in CHAINS} == dict.fromkeys(CHAINS, 1), (mode, counts)
    assert summary["store"]["pending"] == 0
    store = SqliteStore(out / "crawl.db")
    try:
        pages = {p.url: p for p in store.iter_pages()}
        known = {u for u in (tb.url(i, p) for p in CHAINS) if store.get_url(u) is not None}
    finally:
        store.close()
    # /r/0's outcome names the known target it stopped at (in-process: after its /r2/0 hop).
    assert pages[tb.url(i, "/r/0")].final_url in (tb.url(i, "/moved/0"), tb.url(i, "/r2/0"))
    assert pages[tb.url(i, "/moved/0")].status == 200
    # Every URL a chain requested is in the crawl db: a link to it later is known.
    assert known == {tb.url(i, p) for p in CHAINS}
