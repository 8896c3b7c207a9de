"""S1 on a real fleet (real RabbitMQ, worker and dispatcher processes), judged from the testbed's log:

- rule 2: a quota of m URLs/s holds every second of every minute (the URLs the testbed was asked for
  by the end of second s of a minute never pass floor(s*m)), while the crawl has more work than that,
  through a minute's turn (a batch granted in a minute's last second starts no URL in the next one);
- rule 3: every batch went to a node whose u = p*s + q - r (from its own heartbeat) exceeded t;
- rule 1: a crawl whose service is not in the quota list fetches nothing and says why in its log.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.quota_trial import granted_requests
from pipeline.harness.testbed.harness import TestbedProcess
from tests.fixtures.rabbitmq import MAX_DEPTH, key

pytestmark = [pytest.mark.integration]

PER_S = 4.0


def _stop(f: Any) -> dict[str, Any]:
    assert f.dispatcher is not None
    f.dispatcher.terminate()
    out, _ = f.dispatcher.communicate(timeout=60)
    # A stopped dispatcher exits 0 with its summary as the last line; anything else is a failure to name.
    assert f.dispatcher.returncode == 0, (f.dispatcher.returncode, f.log_tail("dispatcher.log"))
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    assert lines, (out[-2000:], f.log_tail("dispatcher.log"))
    return dict(json.loads(lines[-1]))


def test_quota_holds_every_second_and_batches_go_by_u(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    with TestbedProcess(20, 60, seed=5, workdir=tmp_path / "tb") as tb:
        quotas = tmp_path / "quotas.toml"
        f = fleet(
            rabbitmq, tb, max_depth=MAX_DEPTH, extra_env={"CRAWLFLEET_DISPATCH_QUOTAS_FILE": str(quotas)}
        )
        quotas.write_text(f"[services]\n{f.service} = {PER_S}\n")
        f.start_worker(1, slots=4)
        f.start_worker(2, slots=4)
        start = time.time()
        before = len(tb.read_access_log())
        f.start_dispatcher()
        f.wait_event(lambda ev: ev["ev"] == "issue", timeout_s=120)  # workers take seconds to start
        # Run through the turn of a minute: grants of a minute's last second must not reach the web in the
        # next minute's first (S1 counts them in the minute they were granted; the node fences them).
        turn = (int(time.time() + 3) // 60 + 1) * 60  # at least 3 s of crawl before it
        truth = tb.truth(max_depth=MAX_DEPTH)
        hops = {key(u) for u in truth.get("redirect_hops", ())}

        def past_turn() -> bool:  # the event: the web has served a granted URL of the next minute's second 2
            tb.flush_log()
            return any(float(e["t"]) >= turn + 1 for e in granted_requests(tb.read_access_log()[before:], hops))

        deadline = time.monotonic() + 240  # a bound on the wait, not a verdict
        while not past_turn() and time.monotonic() < deadline:
            time.sleep(0.2)
        summary = _stop(f)
        tb.wait_log_flush()
        log = [e for e in tb.read_access_log()[before:] if float(e["t"]) >= start - 1]
        asked = granted_requests(log, hops)
        assert len(asked) >= PER_S * 5, len(asked)  # the crawl did run
        times = [float(e["t"]) for e in asked]
        assert min(times) < turn <= max(times)  # it ran on both sides of the turn
        per_second = Counter(int(float(e["t"])) for e in asked)
        for sec in range(int(start), int(time.time()) + 1):  # by the end of each second of its minute
            minute0 = sec - sec % 60
            so_far = sum(n for t, n in per_second.items() if minute0 <= t <= sec)
            assert so_far <= math.floor((sec - minute0 + 1) * PER_S), (sec, so_far)
        issues = [ev for ev in f.events() if ev["ev"] == "issue"]
        assert issues and all(ev["n"] <= math.ceil(PER_S) for ev in issues)  # a request is one second's worth
        assert all(ev["u"] is not None and ev["u"] > ev["n"] for ev in issues), issues[:3]  # S1 rule 3
        # Which nodes get batches is S1's choice by u (q, the free download slots, dominates it): not both
        # necessarily on a loaded box.
        assert {ev["node"] for ev in issues} <= {f.node(1), f.node(2)}
        assert all(ev["q"] > 0 for ev in issues)  # q: the free slots of the node's own heartbeat
        assert summary["quota"] == f"{PER_S:g} URLs/s from {quotas}"
        assert summary["fleet"]["serial_checks"] >= len(
            [e for e in f.events() if e["ev"] == "done"]
        )  # S1 check


def test_a_service_not_in_the_quota_list_fetches_nothing_and_is_logged(
    rabbitmq: str, fleet: Any, tmp_path: Path
) -> None:
    with TestbedProcess(4, 10, seed=6, workdir=tmp_path / "tb") as tb:
        quotas = tmp_path / "quotas.toml"
        quotas.write_text("[services]\nsomeone_else = 100\n")
        f = fleet(
            rabbitmq, tb, max_depth=MAX_DEPTH, extra_env={"CRAWLFLEET_DISPATCH_QUOTAS_FILE": str(quotas)}
        )
        f.start_worker(1, slots=2)
        before = len(tb.read_access_log())
        f.start_dispatcher()
        f.wait_event(lambda ev: ev["ev"] == "node_up", timeout_s=60)
        deadline = time.monotonic() + 60  # the event: the dispatcher has said why it fetches nothing
        while "is not in the quota list" not in f.log_tail("dispatcher.log", 20000) and time.monotonic() < deadline:
            time.sleep(0.1)
        _stop(f)
        tb.wait_log_flush()
        pages = [e for e in tb.read_access_log()[before:] if e["path"] != "/robots.txt"]
        assert pages == []
        assert not [ev for ev in f.events() if ev["ev"] == "issue"]
        assert f"service '{f.service}' is not in the quota list" in f.log_tail("dispatcher.log", 20000)
