"""``scope.max_pages_per_host`` is a total over a crawl's runs, as ``--max-pages`` is: a crawl stopped
part-way (its page budget) and resumed twice fetches at most the cap from any host in all, judged from
the testbed's access log. Before, each run counted a host's pages from 0 (the count lived in the
frontier's memory), so every resume could take a whole cap's worth again.

A resume that the cap leaves nothing to fetch says so and exits 0 (it used to exit 1 with "no page
fetched; top errors: none").
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.base import UrlState
from pipeline.storage.sqlite import SqliteStore

pytestmark = pytest.mark.e2e

CAP = 6


def crawl(env: dict[str, str], *args: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "crawl", "--no-progress", "--json", *args],
                          capture_output=True, text=True, timeout=240, check=False, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_the_host_cap_is_a_total_over_resumes(tmp_path: Path) -> None:
    env = {**os.environ, "CRAWLFLEET_SCOPE_MAX_PAGES_PER_HOST": str(CAP)}
    with TestbedProcess(5, 30, seed=4, workdir=tmp_path / "tb") as tb:
        out = tmp_path / "out"
        crawl(env, *tb.seeds, "--out", str(out), "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network",
              "127.0.10.0/24", "--host-delay", "0.01", "--max-pages", "12")  # fmt: skip
        crawl(env, "--resume", "--out", str(out), "--max-pages", "20")
        crawl(env, "--resume", "--out", str(out), "--max-pages", "0")
        tb.wait_log_flush()
        log = tb.read_access_log()
        again = subprocess.run([sys.executable, "-m", "pipeline.cli", "crawl", "--no-progress", "--json", "--resume",
                                "--out", str(out)], capture_output=True, text=True, timeout=240, env=env)  # fmt: skip
        tb.wait_log_flush()
        assert len(tb.read_access_log()) == len(log)  # the capped hosts were not asked for anything
    with SqliteStore(out / "crawl.db") as store:
        pending = store.counts()["pending"]
    with closing(sqlite3.connect(out / "crawl.db")) as db:
        rows = {(urlsplit(u).hostname, urlsplit(u).path): UrlState(s) for u, s in db.execute("SELECT url, state FROM urls")}
    # A page the cap counts: a request that is not robots.txt nor a hop of a redirect chain (those are
    # settled SKIPPED under the URL that started the chain, as one page).
    requested = {(e["host"], e["path"]) for e in log if e["path"] != "/robots.txt"}
    pages = collections.Counter(h for h, p in requested if rows.get((h, p)) is not UrlState.SKIPPED)
    assert pages and max(pages.values()) == CAP, pages  # the cap was reached, and by no host passed
    assert pending > 0  # the capped hosts' other URLs stay PENDING
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["pages_fetched"] == 0
    assert f"have taken scope.max_pages_per_host = {CAP} URLs and {pending} URL(s) wait" in again.stderr
