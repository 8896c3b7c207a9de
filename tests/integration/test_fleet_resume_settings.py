"""A fleet crawl directory remembers its settings, as an embedded one does (#21 point 2).

Real RabbitMQ, a real worker, the real dispatcher process; judged from the testbed's access log:
``--max-pages`` is a total over every run of the crawl, ``dispatcher --resume --out DIR`` alone goes
on with what the first run was given, and a flag given at resume overrides it with one logged line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipeline.crawl import remember
from pipeline.harness.testbed.harness import TestbedProcess
from tests.fixtures.rabbitmq import MAX_DEPTH, fetch_counts, key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def _pages(tb: TestbedProcess) -> dict[tuple[str, str], int]:
    """Requests per (host, path) in the testbed's access log; a redirect's hop and target are two."""
    return {k: n for k, n in fetch_counts(tb).items() if k[1] != "/robots.txt"}


def _settled(summary: dict[str, Any]) -> int:
    return sum(summary["store"].get(k, 0) for k in ("done", "failed", "blocked"))


def test_max_pages_is_a_total_and_resume_remembers_it(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    with TestbedProcess(10, 40, seed=21, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH)
        f.start_worker(1)
        f.start_dispatcher("--max-pages", "30")
        first = f.wait_dispatcher()
        assert remember.load(f.out) is not None and remember.load(f.out).settings["scope"]["max_pages"] == 30  # type: ignore[union-attr]
        after_first = _pages(tb)
        assert 0 < _settled(first) <= 30 and after_first

        # --resume alone: the remembered total is reached, so nothing is fetched and it says why.
        again = subprocess.run([sys.executable, "-m", "pipeline.cli", "dispatcher", "--resume", "--out", str(f.out),
                                "--json", "--no-progress"], env=f.env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert "--max-pages is 30 in all" in again.stderr
        assert _pages(tb) == after_first

        # A larger total at resume: it goes on to that total, and the override is logged.
        f.start_dispatcher("--resume", "--max-pages", "55", "--log-level", "INFO")
        second = f.wait_dispatcher()
        pages = _pages(tb)
        assert _settled(first) < _settled(second) <= 55 and len(pages) > len(after_first), second["store"]
        truth = {key(u) for u in tb.truth(max_depth=MAX_DEPTH)["pages"]}  # error pages are retried by design
        assert [k for k, n in pages.items() if n > 1 and k in truth] == [], "no page fetched twice in three runs"
        assert "scope.max_pages = 55 (flag) overrides the crawl's remembered 30" in f.log_tail("dispatcher.log")
        assert json.loads((f.out / remember.FILE).read_text())["settings"]["scope"]["max_pages"] == 55


def test_the_host_cap_is_a_total_over_dispatcher_runs(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    """``scope.max_pages_per_host`` counts the URLs a host gave in earlier runs (the crawl db's, read at
    restart: ``Store.taken_per_host``), as ``--max-pages`` does: after a stop part-way and a resume, no
    host has given more distinct URLs than the cap. Before, a restarted dispatcher counted from 0. A
    resume the cap leaves nothing to fetch asks for nothing and names the cap on stderr."""
    cap = 5
    with TestbedProcess(6, 40, seed=21, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, extra_env={"CRAWLFLEET_SCOPE_MAX_PAGES_PER_HOST": str(cap)})
        f.start_worker(1)
        f.start_dispatcher("--max-pages", "12")
        first = f.wait_dispatcher()
        f.start_dispatcher("--resume", "--max-pages", "0")
        last = f.wait_dispatcher()
        before = _pages(tb)
        per_host = Counter(host for host, _ in before)  # a node stops at redirects: each hop a URL
        # Once more: every host with URLs left is capped, so nothing is asked for and it says why.
        again = subprocess.run([sys.executable, "-m", "pipeline.cli", "dispatcher", "--resume", "--out", str(f.out),
                                "--json", "--no-progress"], env=f.env, capture_output=True, text=True, timeout=120)  # fmt: skip
        after = _pages(tb)
    assert 0 < _settled(first) <= 12 < _settled(last), (first["store"], last["store"])
    assert max(per_host.values()) == cap, per_host
    assert last["store"]["pending"] > 0  # the capped hosts' other URLs stay PENDING
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["pages_fetched"] == 0
    assert after == before  # the capped hosts were not asked for anything
    pending = last["store"]["pending"]
    assert f"have taken scope.max_pages_per_host = {cap} URLs and {pending} URL(s) wait" in again.stderr, again.stderr
