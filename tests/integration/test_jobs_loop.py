"""The loop end to end on the testbed: crawl -> segments -> MapReduce jobs -> crawl db -> pending set.

The embedded crawler journals every result into segments. Running the link jobs over those
segments against a fresh crawl db must rediscover exactly the URLs the crawler discovered inline
(same extract/filter code, same scope, depth and trap rules) and leave them PENDING, and a second
pass over the same segments must add nothing.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.runner import JobArgs, LinkPipeline
from jobs.runnerconfig import RunnerConfig
from jobs.watch import closed_segments, run_pipelined
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import host_of, normalize, registered_domain

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

MAX_DEPTH = 3


def crawl(tb: TestbedProcess, out: Path) -> None:
    cmd = [sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out),
           "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
           "--max-depth", str(MAX_DEPTH), "--host-delay", "0.01", "--json", "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]


def linked_urls(db: Path) -> set[str]:
    """The crawl db's URLs but the hops of redirect chains the crawler followed itself: those are settled
    by the crawler (pipeline/crawl/redirects.py), not discovered as links, so no link job finds them. (A
    fleet node never follows a redirect; its target reaches the jobs as a link: test_redirect_fleet.py.)"""
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT url FROM urls WHERE error NOT LIKE 'redirect: requested in%'")}


def test_jobs_rediscover_what_the_crawler_discovered(tmp_path: Path) -> None:
    with TestbedProcess(4, 25, seed=11, workdir=tmp_path / "tb") as tb:
        out = tmp_path / "crawl"
        crawl(tb, out)
        seeds = {normalize(s) for s in tb.seeds}
    segments = closed_segments(out / "segments", include_last=True)
    assert segments, "the crawler journals results into segments"
    domains = tuple(sorted({registered_domain(host_of(s)) for s in seeds if s}))
    db = tmp_path / "jobs.db"
    pipeline = LinkPipeline(RunnerConfig(runner="inline", work_dir=tmp_path / "work"),
                            JobArgs(store=f"sqlite:{db}", allowed_domains=domains, max_depth=MAX_DEPTH))
    rounds = list(run_pipelined(segments, pipeline.process))
    new = {item["url"] for r in rounds for item in r.new_pending}

    crawled = linked_urls(out / "crawl.db")
    assert new, "the segments hold pages with links"
    assert new | seeds == crawled | seeds
    with SqliteStore(db) as store:
        assert store.counts()["pending"] == len(new)

    again = list(run_pipelined(segments, pipeline.process))
    assert sum(len(r.new_pending) for r in again) == 0
    print(json.dumps([r.summary() for r in rounds])[:2000])
