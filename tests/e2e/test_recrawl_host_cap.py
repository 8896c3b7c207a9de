"""A continuous crawl with ``scope.max_pages_per_host`` keeps its capped hosts fresh (#23 with #22's cap),
judged from the living testbed's access log: each host gives exactly the cap in distinct pages, over a
run and its resume (robots.txt and sitemap files are fetched beside them, not counted), and its pages go
on being re-fetched after the cap is reached, in both runs.

Before, the cap counted fetches: a re-fetch spent it like a new page, and a capped host was never leased
again, so a continuous crawl stopped refreshing every capped host (a 25 s run made no request after its
12th second).
"""

from __future__ import annotations

import collections
import os
import sqlite3
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pipeline.harness.bench.continuous import ContinuousCrawl
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.base import INFRA_SOURCES, UrlState

pytestmark = pytest.mark.e2e

CAP, HOSTS = 8, 4
CONFIG = """
[recrawl]
initial_interval_s = 1.0
min_interval_s = 0.5
max_interval_s = 4.0
check_interval_s = 0.2
failed_interval_s = 1.0
"""


def _run(tb: TestbedProcess, out: Path, cfg: Path, *extra: str, repeats_each: int) -> float:
    """Crawl continuously until every host's pages have had ``repeats_each`` re-fetches in this run;
    returns the run's start time."""
    stop = out.parent / "stop"
    cmd = [sys.executable, "-m", "pipeline.cli", "crawl", "--out", str(out), "--no-progress", "--json",
           "--config", str(cfg), "--continuous", "--stop-file", str(stop), *extra]  # fmt: skip
    env = {**os.environ, "CRAWLFLEET_SCOPE_MAX_PAGES_PER_HOST": str(CAP)}
    start = time.time()
    with ContinuousCrawl(cmd, stop, env=env) as crawl:
        deadline = time.time() + 90
        while time.time() < deadline and crawl.running():
            tb.wait_log_flush()
            repeats = _repeats(tb.read_access_log(), since=start)
            if len(repeats) == HOSTS and min(repeats.values()) >= repeats_each:
                break
            time.sleep(0.3)
        assert crawl.running(), crawl.stderr_tail()
        code, _, stderr = crawl.stop(timeout_s=60)
    assert code == 0, stderr[-3000:]
    return start


def _pages(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requests for the host's URLs: all but robots.txt, which politeness fetches anyway. (A capped host's
    URLs can be its error pages and files: the testbed's hosts differ in what their seeds link to.)"""
    return [e for e in log if e["path"] != "/robots.txt"]


def _repeats(log: list[dict[str, Any]], *, since: float) -> dict[str, int]:
    """Requests per host, made since ``since``, of a path the host had served before: re-fetches (and
    retries of errors)."""
    seen: set[tuple[str, str]] = set()
    out: collections.Counter[str] = collections.Counter()
    for e in sorted(_pages(log), key=lambda e: float(e["t"])):
        key = (e["host"], e["path"])
        if key in seen and float(e["t"]) >= since:
            out[e["host"]] += 1
        seen.add(key)
    return dict(out)


def _new_paths(log: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per host, the time of each request for a path it had not been asked for before."""
    seen: set[tuple[str, str]] = set()
    out: dict[str, list[float]] = collections.defaultdict(list)
    for e in sorted(log, key=lambda e: float(e["t"])):
        key = (e["host"], e["path"])
        if key not in seen:
            seen.add(key)
            out[e["host"]].append(float(e["t"]))
    return out


def test_a_continuous_crawl_keeps_refetching_its_capped_hosts(make_testbed: Any, tmp_path: Path) -> None:
    tb: TestbedProcess = make_testbed(HOSTS, 30, mutate=True, mutate_rate=1.0)
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(CONFIG)
    out = tmp_path / "out"
    first = _run(tb, out, cfg, *tb.seeds, "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network",
                 "127.0.10.0/24", "--host-delay", "0.02", repeats_each=25)  # fmt: skip
    resumed = _run(tb, out, cfg, "--resume", repeats_each=10)
    tb.wait_log_flush()
    log = [e for e in tb.read_access_log() if float(e["t"]) >= first]

    with closing(sqlite3.connect(out / "crawl.db")) as db:
        rows = {
            (urlsplit(u).hostname, urlsplit(u).path): (UrlState(s), src)
            for u, s, src in db.execute("SELECT url, state, discovered_from FROM urls")
        }
    # A page the cap counts: any path requested but a hop of a redirect chain (settled SKIPPED, with the
    # URL that started the chain), robots.txt and the sitemap files (fetched to find pages, not pages).
    requested = {(e["host"], e["path"]) for e in log}
    infra = {k for k in requested if k in rows and rows[k][1] in INFRA_SOURCES}
    distinct = collections.Counter(
        h for h, p in requested - infra if (h, p) in rows and rows[h, p][0] is not UrlState.SKIPPED
    )
    assert len(distinct) == HOSTS and set(distinct.values()) == {CAP}, distinct
    # ... and the files were fetched beside the cap's pages: each host's robots.txt (by the fetcher, never
    # a crawl URL), and the sitemap of every host that lists one (before, they took the place of pages,
    # and a file found once the host was capped was never fetched).
    assert {h for h, p in requested if p == "/robots.txt"} == set(distinct)
    assert not {k for k in rows if k[1] == "/robots.txt"}
    files = {p for _, p in infra if p != "/robots.txt"}
    assert {"/sitemap.xml", "/sitemap_index.xml"} <= files and len(files) > 2, files
    # Every host was capped in the first run, and was re-fetched after its last new page (before the fix,
    # a host made no request at all once capped); the resumed run only re-fetched.
    new_paths = _new_paths([e for e in log if (e["host"], e["path"]) not in infra])  # pages only: a host's
    # sitemap files may keep coming after it is capped (an index's children, one polite fetch at a time)
    for host, times in new_paths.items():
        capped_at = times[-1]
        assert capped_at < resumed, host
        after = [e for e in _pages(log) if e["host"] == host and capped_at < float(e["t"]) < resumed]
        assert len(after) >= 10, (host, len(after))
    assert min(_repeats(log, since=resumed).values()) >= 10
    assert any(e["status"] == 304 for e in _pages(log) if float(e["t"]) >= resumed)
