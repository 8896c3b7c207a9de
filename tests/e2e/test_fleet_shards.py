"""S5 between dispatcher peers, on real RabbitMQ and HBase with real processes: three dispatcher shards, three
fetch nodes and the link jobs crawl the testbed, judged from its access log and the store.

- every reachable page fetched exactly once and stored once, by three shards that each own whole hosts;
- a shard killed with SIGKILL mid-crawl: its hosts are taken over by a peer, nothing is lost, and nothing is
  fetched twice beyond what the dead shard had in flight;
- a skewed web (one shard owns every host) ends with the other shards holding hosts and fetching pages
  (the communicating-vessels rule: blocks of hosts through the remote queue);
- S1's per-minute quota divided among the shards holds at the testbed's access log, and after a shard's
  kill the live shards share its part from the next minute: the web is asked for the whole budget again,
  never more.
"""

from __future__ import annotations

import collections
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.hbase import HBaseStore
from pipeline.storage.hostowners import HostOwners
from tests.fixtures.hbase import HOST, PORT
from tests.fixtures.rabbitmq import MAX_DEPTH, Fleet, check_truth, fetch_counts, key
from tests.integration.test_fleet_link_jobs import check_hbase_exactly_once

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = Path(__file__).resolve().parents[2]


class Shards:
    """The dispatcher shards of one fleet crawl, as real ``crawlfleet dispatcher --shard I`` processes."""

    def __init__(self, f: Fleet) -> None:
        self.f = f
        self.procs: dict[int, subprocess.Popen[str]] = {}

    def start(self, i: int, *extra: str, seeds: list[str] | None = None) -> subprocess.Popen[str]:
        urls = self.f.tb.seeds if seeds is None else seeds
        cmd = [sys.executable, "-m", "pipeline.cli", "dispatcher", *urls, "--out", str(self.f.out),
               "--json", "--no-progress", "--shard", str(i), *extra]  # fmt: skip
        err = open(self.f.workdir / f"shard-{i}.log", "a")  # noqa: SIM115 - owned by the process
        self.procs[i] = subprocess.Popen(cmd, env=self.f.env, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
        if self.f.links is None or self.f.links.poll() is not None:
            self.f.start_links()
        return self.procs[i]

    def start_all(self, *, seeds: list[str] | None = None, shards: tuple[int, ...] = (0, 1, 2)) -> None:
        """Three fetch nodes (4 slots each), then the shards ``shards`` (0, 1 and 2)."""
        for i in (1, 2, 3):
            self.f.start_worker(i, slots=4)
        for i in shards:
            self.start(i, seeds=seeds)

    def wait(self, i: int, *, timeout_s: float = 300) -> dict[str, Any]:
        out, _ = self.procs[i].communicate(timeout=timeout_s)
        assert self.procs[i].returncode == 0, self.f.log_tail(f"shard-{i}.log")
        return dict(json.loads(out.strip().splitlines()[-1]))

    def terminate(self, i: int) -> dict[str, Any]:
        """Stop shard ``i`` (SIGTERM) and return its summary."""
        self.procs[i].terminate()
        return self.wait(i, timeout_s=60)

    def kill_when_busy(self, i: int, *, done: int = 5) -> float:
        """SIGKILL shard ``i`` once it has seen ``done`` batches answered (so it has batches out); when."""
        deadline = time.monotonic() + 120
        while sum(ev["ev"] == "done" for ev in self.events(i)) < done and time.monotonic() < deadline:
            time.sleep(0.1)
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait(10)
        return time.time()

    def events(self, i: int) -> list[dict[str, Any]]:
        path = self.f.out / f"shard-{i}" / "fleet-events.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def shard_env(prefix: str, *, shards: int = 3, block: int = 40, **more: str) -> dict[str, str]:
    """Shards on HBase with a 1 s heartbeat; a few hosts active at once per shard, so that most wait in
    its queue and may move (a leased host never does)."""
    return {"CRAWLFLEET_STORE_KIND": "hbase", "CRAWLFLEET_STORE_HBASE_PREFIX": prefix,
            "CRAWLFLEET_DISPATCH_SHARDS": str(shards), "CRAWLFLEET_DISPATCH_SHARD_HEARTBEAT_S": "1.0",
            "CRAWLFLEET_DISPATCH_SHARD_BLOCK_URLS": str(block), "CRAWLFLEET_DISPATCH_ACTIVE_HOSTS": "4",
            **more}  # fmt: skip


def stop(proc: subprocess.Popen[Any] | None) -> None:
    if proc is not None and proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(60)


def owners(prefix: str, service: str) -> collections.Counter[int]:
    store = HBaseStore(HOST, PORT, prefix=prefix)
    try:
        return collections.Counter(o.shard for o in HostOwners(store, service).scan())
    finally:
        store.close()


def test_three_shards_and_three_nodes_crawl_the_testbed_exactly_once(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str
) -> None:
    prefix = f"{hbase_prefix}sh3"
    with TestbedProcess(40, 12, seed=31, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, extra_env=shard_env(prefix))
        shards = Shards(f)
        try:
            shards.start_all()
            summaries = {i: shards.wait(i) for i in (0, 1, 2)}
        finally:
            shards.stop()
            stop(f.links)
        truth = tb.truth(max_depth=MAX_DEPTH)
        check_truth(tb, truth, nodes=3)
        check_hbase_exactly_once(prefix, truth)
        # Three shards worked: each fetched pages of hosts it owned, and every host has one owner.
        fetched = {i: s["pages_fetched"] + s["pages_failed"] for i, s in summaries.items()}
        assert all(n > 0 for n in fetched.values()), fetched
        assert sum(owners(prefix, f.service).values()) >= 40
        assert all(s["shard"]["shards"] == 3 for s in summaries.values())


def test_a_shard_killed_mid_crawl_is_taken_over_with_nothing_lost(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str
) -> None:
    prefix = f"{hbase_prefix}shk"
    with TestbedProcess(12, 60, seed=32, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, host_delay=0.1, extra_env=shard_env(prefix))
        shards = Shards(f)
        try:
            shards.start_all()
            killed_at = shards.kill_when_busy(2)  # once it has batches out
            summaries = {i: shards.wait(i) for i in (0, 1)}
        finally:
            shards.stop()
            stop(f.links)
        truth = tb.truth(max_depth=MAX_DEPTH)
        # Taken over within two heartbeats (1 s each, plus the time to move its hosts).
        takeovers = [ev for i in (0, 1) for ev in shards.events(i) if ev["ev"] == "shard_takeover"]
        assert len(takeovers) == 1 and takeovers[0]["shard"] == 2, takeovers
        assert takeovers[0]["t"] - killed_at < 2 * 1.0 + 1.0, (takeovers[0]["t"], killed_at)
        # Nothing lost: every reachable page fetched and stored once.
        counts = fetch_counts(tb)
        assert [u for u in truth["pages"] if counts[key(u)] == 0] == []
        check_hbase_exactly_once(prefix, truth)
        # No repeat beyond what shard 2 had in flight: URLs issued by it and not answered before it died.
        in_flight = in_flight_urls(shards.events(2))
        assert all(k in in_flight for k in repeated(counts)), (repeated(counts), len(in_flight))
        assert sum(s["shard"]["takeovers"] for s in summaries.values()) == 1


def repeated(counts: collections.Counter[tuple[str, str]]) -> list[tuple[str, str]]:
    """(host, path) fetched more than once, but robots.txt (once per node may fetch it) and /error/ pages
    (they answer 500: retried by design, ``fetch.retries``)."""
    return [k for k, n in counts.items() if n > 1 and k[1] != "/robots.txt" and not k[1].startswith("/error/")]


def in_flight_urls(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(host, path) of every URL of a batch the shard issued and had not seen answered."""
    issued: dict[int, list[str]] = {}
    for ev in events:
        if ev["ev"] == "issue":
            issued[ev["serial"]] = ev.get("urls", [])
        elif ev["ev"] == "done":
            issued.pop(ev["serial"], None)
    return {key(u) for urls in issued.values() for u in urls}


def run_skewed(rabbitmq: str, fleet: Any, tmp_path: Path, prefix: str, *, balance: bool) -> dict[str, Any]:
    """One crawl of a web found from one seed (so one shard finds every host at home), by three shards."""
    with TestbedProcess(30, 40, seed=33, workdir=tmp_path / f"tb-{balance}") as tb:
        # Two hosts at work at once per shard: the finder's other hosts wait in its queue, a backlog the
        # rule must share out (with more at work, the finder can keep up with what the link rounds find,
        # its queue stays near the others' and whether a shard gets any host depends on timing).
        env = shard_env(prefix, block=10, CRAWLFLEET_DISPATCH_SHARD_BALANCE=str(balance).lower(),
                        CRAWLFLEET_DISPATCH_ACTIVE_HOSTS="2")  # fmt: skip
        if balance:  # signed, as a fleet off loopback must be: batches, results, reports and the blocks
            env["CRAWLFLEET_FLEET_KEY"] = "5e" * 32
        # A host delay of 0.1 s keeps that backlog for longer than the rule's window of heartbeats: with link
        # rounds under a second the whole web is found in a burst, and at the default delay the finder
        # drained 500 waiting URLs in 4 s, before its smoothed level said push (a fresh-clone run).
        f = fleet(rabbitmq, tb, max_depth=40, host_delay=0.1, extra_env=env)
        shards = Shards(f)
        try:
            shards.start_all(seeds=tb.seeds[:1])
            summaries = {i: shards.wait(i) for i in (0, 1, 2)}
        finally:
            shards.stop()
            f.stop()  # its nodes too: the next crawl's shards would hear them (one broker)
        counts = fetch_counts(tb)
    repeats = repeated(counts)
    pages = {i: s["pages_fetched"] + s["pages_failed"] for i, s in summaries.items()}
    return {"repeats": repeats, "hosts": len({h for h, _ in counts}), "pages": pages, "summaries": summaries}


def test_a_skewed_web_is_shared_out_by_the_vessels_rule(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str
) -> None:
    """From one seed, the shard that owns it finds every other host at home (S5's produce and consume at
    home): without the communicating-vessels rule the other two shards never work; with it, whole hosts go
    through the remote queue in blocks and every shard fetches a share, each page still once. The run with
    the rule signs every message (a fleet key set), blocks included."""
    without = run_skewed(rabbitmq, fleet, tmp_path, f"{hbase_prefix}skn", balance=False)
    with_rule = run_skewed(rabbitmq, fleet, tmp_path, f"{hbase_prefix}sky", balance=True)
    for run in (without, with_rule):
        assert run["repeats"] == [] and run["hosts"] >= 25, run
    assert sorted(without["pages"].values())[:2] == [0, 0], without["pages"]  # one shard did it all
    # With the rule every shard took hosts from the remote queue or kept its own, and fetched pages; the
    # finder's share falls (how far is the bench's measure: ``crawlfleet bench shards``).
    total = sum(with_rule["pages"].values())
    assert min(with_rule["pages"].values()) > 0 and max(with_rule["pages"].values()) < 0.9 * total, with_rule["pages"]
    moves = [s["shard"] for s in with_rule["summaries"].values()]
    assert sum(m["pushed_blocks"] for m in moves) >= 1 and sum(m["pulled_hosts"] for m in moves) >= 2
    assert all(m["hosts_owned"] > 0 for m in moves), moves
    assert sum(m["pushed_blocks"] for m in (s["shard"] for s in without["summaries"].values())) == 0


PER_S = 6.0


def quota_fleet(rabbitmq: str, fleet: Any, tb: TestbedProcess, tmp_path: Path, prefix: str, *,
                slots: int) -> tuple[Any, Shards, Path, set[tuple[str, str]]]:  # fmt: skip
    """A fleet whose three shards share PER_S URLs/s of the service (the quota file), its three nodes started;
    and the web's redirect hops (not counted by S1)."""
    quotas = tmp_path / "quotas.toml"
    f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH,
              extra_env=shard_env(prefix, CRAWLFLEET_DISPATCH_QUOTAS_FILE=str(quotas)))  # fmt: skip
    quotas.write_text(f"[services]\n{f.service} = {PER_S}\n")
    for i in (1, 2, 3):
        f.start_worker(i, slots=slots)
    return f, Shards(f), quotas, {key(u) for u in tb.truth(max_depth=MAX_DEPTH).get("redirect_hops", ())}


def test_the_quota_split_across_shards_holds_at_the_web(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str
) -> None:
    """S1's budget of the service (6 URLs/s) divided among three shards (2 each): the URLs the testbed was
    asked for by the end of second s of a minute never pass floor(s x 6), and every shard spent its part."""
    from pipeline.harness.faults.quota_trial import granted_requests

    prefix = f"{hbase_prefix}shq"
    with TestbedProcess(30, 40, seed=34, workdir=tmp_path / "tb") as tb:
        f, shards, quotas, hops = quota_fleet(rabbitmq, fleet, tb, tmp_path, prefix, slots=4)
        start = time.time()
        before = len(tb.read_access_log())
        try:
            for i in (0, 1, 2):
                shards.start(i)
            deadline = time.monotonic() + 120  # a bound on the wait: until the web has served 14 s of quota
            while time.monotonic() < deadline:
                tb.flush_log()
                if len(granted_requests(tb.read_access_log()[before:], hops)) >= 14 * PER_S:
                    break
                time.sleep(0.5)
            summaries = {i: shards.terminate(i) for i in (0, 1, 2)}
        finally:
            shards.stop()
            stop(f.links)
        tb.wait_log_flush()
        log = [e for e in tb.read_access_log()[before:] if float(e["t"]) >= start - 1]
    asked = granted_requests(log, hops)
    assert len(asked) >= 12 * PER_S, len(asked)
    check_s1_at_the_web(asked, start)
    for i, s in summaries.items():
        assert s["quota"] == f"{PER_S:g} URLs/s from {quotas}", s["quota"]
        assert s["pages_fetched"] + s["pages_failed"] > 0, (i, s["pages_fetched"])
        assert s["shard"]["quota_part"] >= 1 / 3 - 1e-9, s["shard"]  # a third each (or more as the others stop)


def check_s1_at_the_web(asked: list[dict[str, Any]], start: float) -> collections.Counter[int]:
    """The URLs the web was asked for by the end of each second s of a minute never pass floor(s x PER_S);
    returns the count asked in each second."""
    per_second = collections.Counter(int(float(e["t"])) for e in asked)
    for sec in range(int(start), int(time.time()) + 1):  # by the end of each second of its minute
        minute0 = sec - sec % 60
        so_far = sum(n for t, n in per_second.items() if minute0 <= t <= sec)
        assert so_far <= math.floor((sec - minute0 + 1) * PER_S), (sec, so_far)
    return per_second


def test_a_dead_shards_part_of_the_quota_goes_to_the_live_shards_from_the_next_minute(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str
) -> None:
    """Three shards share 6 URLs/s; shard 2 is killed (SIGKILL) mid-crawl. Once it has been taken over, the
    next minute's plan names shards 0 and 1 only: in that whole minute the web is asked for nearly the whole
    budget (a fixed split left the two a third each: 240 of 360), each survivor issuing more than its old
    third, and never more than floor(s x 6) by any second s of any minute."""
    from pipeline.dispatch.quotashares import SharePlan
    from pipeline.harness.faults.quota_trial import granted_requests
    from pipeline.transport.dispatcher.shardquota import plan_key

    prefix = f"{hbase_prefix}sqk"
    budget = 60 * PER_S
    with TestbedProcess(40, 60, seed=35, workdir=tmp_path / "tb") as tb:
        f, shards, _, hops = quota_fleet(rabbitmq, fleet, tb, tmp_path, prefix, slots=6)
        start = time.time()
        before = len(tb.read_access_log())
        try:
            for i in (0, 1, 2):
                shards.start(i)
            shards.kill_when_busy(2)
            deadline = time.monotonic() + 60
            while not (took := [ev for i in (0, 1) for ev in shards.events(i) if ev["ev"] == "shard_takeover"]):
                assert time.monotonic() < deadline, "shard 2 was not taken over"
                time.sleep(0.2)
            minute = int(took[0]["t"] + 1) // 60 + 1  # the first minute begun after the takeover
            while time.time() < 60 * (minute + 1) + 2:  # to the end of that minute
                time.sleep(0.5)
            summaries = {i: shards.terminate(i) for i in (0, 1)}
        finally:
            shards.stop()
            stop(f.links)
        tb.wait_log_flush()
        log = [e for e in tb.read_access_log()[before:] if float(e["t"]) >= start - 1]
    per_second = check_s1_at_the_web(granted_requests(log, hops), start)
    whole = sum(n for t, n in per_second.items() if t // 60 == minute)
    assert 0.85 * budget <= whole <= budget, (whole, budget)
    for i in (0, 1):
        issued = sum(len(ev.get("urls", ())) for ev in shards.events(i)
                     if ev["ev"] == "issue" and int(ev["t"]) // 60 == minute)  # fmt: skip
        assert issued > budget / 3, (i, issued)  # more than a fixed split's third
        assert summaries[i]["shard"]["quota_changes"] >= 1
    # The plan of that minute as the store keeps it (the summaries hold each shard's latest: a shard that
    # ticked into the next minute after the other was stopped shows a plan without it).
    store = HBaseStore(HOST, PORT, prefix=prefix)
    try:
        plan = store.get_meta(plan_key(f.service, minute))
    finally:
        store.close()
    assert plan is not None and SharePlan.decode(plan).members == (0, 1), plan
