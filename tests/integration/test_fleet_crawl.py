"""Fleet mode end to end: real RabbitMQ, real Celery worker processes, the real dispatcher process.

Judged from the testbed's access log and the store, never from the crawler's own word:
- a fleet crawl with 2 workers reaches the same ground truth as the embedded default (every page
  exactly once, nothing outside the truth, no robots-forbidden fetch). robots.txt may be fetched up to once
  per node per host here (the nodes share answers, sqlite_robots.py; test_fleet_link_jobs.py asserts once);
- a worker that misses 2 heartbeat periods (SIGSTOP) gets no new batch, and gets work again when it
  comes back (SIGCONT) — S1's liveness rule.
"""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.accounting import Strike
from pipeline.harness.testbed.harness import TestbedProcess
from tests.fixtures.rabbitmq import MAX_DEPTH, check_store_exactly_once, check_truth

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

def test_fleet_crawl_matches_ground_truth(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    with TestbedProcess(20, 50, seed=3, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH)
        f.start_worker(1)
        f.start_worker(2)
        f.start_dispatcher()
        summary = f.wait_dispatcher()
        truth = tb.truth(max_depth=MAX_DEPTH)
        check_truth(tb, truth, nodes=2)
        check_store_exactly_once(f.out, truth)
        assert summary["fleet"]["nodes"] == sorted([f.node(1), f.node(2)])
        assert summary["fleet"]["expired_batches"] == 0
        assert summary["store"]["pending"] == 0
        done_by = collections.Counter(ev["node"] for ev in f.events() if ev["ev"] == "done")
        assert set(done_by) == {f.node(1), f.node(2)}, done_by  # both nodes worked


def test_worker_missing_two_heartbeats_gets_no_batch_until_it_returns(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    with TestbedProcess(30, 60, seed=4, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, host_delay=0.15, heartbeat_s=0.5)
        a, b = f.start_worker(1), f.start_worker(2)
        f.start_dispatcher()
        f.wait_event(lambda ev: ev["ev"] == "done" and ev["node"] == a)
        fault_t, pids = f.kill_worker(a, signal.SIGSTOP)
        dead = f.wait_event(lambda ev: ev["ev"] == "node_dead" and ev["node"] == a)
        # The crawl goes on without it until the other node has been issued a batch after the death.
        f.wait_event(lambda ev: ev["ev"] == "issue" and ev["node"] == b and ev["t"] > dead["t"])
        back_t, _ = f.kill_worker(a, signal.SIGCONT)
        back = f.wait_event(lambda ev: ev["ev"] == "node_back" and ev["node"] == a)
        summary = f.wait_dispatcher()
        events = f.events()
        while_dead = [ev for ev in events if ev["ev"] == "issue" and dead["t"] <= ev["t"] < back["t"]]
        assert while_dead and {ev["node"] for ev in while_dead} == {b}, "only the live node got work"
        assert any(ev["ev"] == "issue" and ev["node"] == a and ev["t"] >= back["t"] for ev in events), "work again"
        truth = tb.truth(max_depth=MAX_DEPTH)
        check_store_exactly_once(f.out, truth)
        # A batch the stopped node held was re-issued to the other one: only what the stopped node itself
        # had in flight or made in its last second before the stop may show twice, and once continued it
        # may fetch nothing already fetched (the fault judge's rules; no expired batch excuses anything).
        check_truth(tb, truth, nodes=1, strike=Strike("worker", "SIGSTOP", fault_t, back_t, pids))
        assert summary["store"]["pending"] == 0


def test_submit_seeds_to_a_serving_dispatcher(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    """S1's client: the dispatcher starts empty (--serve) and crawls what `crawlfleet submit` sends it."""
    with TestbedProcess(6, 20, seed=11, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH)
        f.start_worker(1)
        proc = f.start_dispatcher("--serve", seeds=False)
        time.sleep(1.0)
        submit = subprocess.run([sys.executable, "-m", "pipeline.cli", "submit", "--service", f.service, *tb.seeds],
                                env=f.env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert submit.returncode == 0, submit.stderr
        f.wait_event(lambda ev: ev["ev"] == "crawl_done", timeout_s=120)
        proc.send_signal(signal.SIGTERM)
        summary = f.wait_dispatcher()
        assert summary["store"]["pending"] == 0
        truth = tb.truth(max_depth=MAX_DEPTH)
        check_truth(tb, truth, nodes=1)
        check_store_exactly_once(f.out, truth)
