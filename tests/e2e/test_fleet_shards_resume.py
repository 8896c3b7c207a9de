"""Dispatcher shards do what a crawl engineer does with one dispatcher, on real RabbitMQ and HBase with real
processes (three shards, three fetch nodes, the link jobs), judged from the testbed's access log and the store:

- a shard killed with SIGKILL mid-crawl and started again with ``--resume`` (same ``--out``, same ``--shard``),
  at once or after a peer has taken it over: every reachable page fetched and stored once, no repeat beyond
  what the killed process had in flight, and the resumed shard gets work again;
- every shard stopped cleanly (SIGTERM) mid-crawl and every one resumed: the crawl ends with every page
  fetched once (a clean stop leaves nothing in flight to repeat);
- a shard added to a running crawl the way docs/FLEET.md says (stop every shard, start each again with
  ``--resume`` under the larger ``dispatch.shards``, the new one too, and the link jobs with it): the new shard
  gets hosts and fetches pages, and every page is fetched once;
- ``--continuous`` on every shard: due URLs come back and are fetched again (conditional GETs), each host's
  batches issued by the one shard that owns it at the time, S1's quota held at the web; the stop file ends
  every shard, and ``--resume`` of every shard goes on re-fetching.
"""

from __future__ import annotations

import collections
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from tests.e2e.test_fleet_shards import (
    PER_S,
    Shards,
    check_s1_at_the_web,
    in_flight_urls,
    owners,
    repeated,
    shard_env,
    stop,
)
from tests.fixtures.rabbitmq import MAX_DEPTH, fetch_counts, key
from tests.integration.test_fleet_link_jobs import check_hbase_exactly_once

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROOT = Path(__file__).resolve().parents[2]
SHARDS = (0, 1, 2)


def issued_after(events: list[dict[str, Any]], t: float) -> int:
    """URLs a shard issued after wall time ``t``."""
    return sum(len(ev.get("urls", ())) for ev in events if ev["ev"] == "issue" and ev["t"] > t)


# Imports what ``crawlfleet dispatcher`` needs, then waits for its go file: a process started ahead of the
# kill, ready to run at once (a cold start took 8-14 s on a loaded 2-core machine, longer than a lease).
READY = (
    "import pathlib, sys, time\n"
    "from pipeline.cli import main\n"
    "import pipeline.transport.dispatcher.service, pipeline.transport.cli\n"
    "go = pathlib.Path(sys.argv[1])\n"
    "pathlib.Path(sys.argv[1] + '.ready').touch()\n"
    "while not go.exists():\n"
    "    time.sleep(0.02)\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def start_ready(shards: Shards, i: int, go: Path, *extra: str) -> subprocess.Popen[str]:
    """Shard ``i`` as ``Shards.start`` runs it, but imported ahead (returns once it is) and started when
    ``go`` exists."""
    f = shards.f
    cmd = [sys.executable, "-c", READY, str(go), "dispatcher", "--out", str(f.out), "--json", "--no-progress",
           "--shard", str(i), *extra]  # fmt: skip
    err = open(f.workdir / f"shard-{i}.log", "a")  # noqa: SIM115 - owned by the process
    proc = subprocess.Popen(cmd, env=f.env, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    shards.procs[i + 100] = proc  # stopped with the others should the test fail before it runs
    deadline = time.monotonic() + 120
    while not Path(f"{go}.ready").exists():
        assert proc.poll() is None and time.monotonic() < deadline, f.log_tail(f"shard-{i}.log")
        time.sleep(0.1)
    return proc


def wait_takeover(shards: Shards, dead: int, *, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        took = [ev for i in SHARDS if i != dead for ev in shards.events(i)
                if ev["ev"] == "shard_takeover" and ev["shard"] == dead]  # fmt: skip
        if took:
            return took[0]
        time.sleep(0.1)
    raise AssertionError(f"shard {dead} was not taken over within {timeout_s}s")


@contextlib.contextmanager
def crawl(rabbitmq: str, fleet: Any, tmp_path: Path, prefix: str, *, seed: int, host_delay: float,
          **env: str) -> Iterator[tuple[TestbedProcess, Shards]]:  # fmt: skip
    """A testbed of 12 hosts of 100 pages crawled by three shards and three nodes; every process stopped at
    the end."""
    with TestbedProcess(12, 100, seed=seed, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, host_delay=host_delay, extra_env={**shard_env(prefix), **env})
        shards = Shards(f)
        try:
            shards.start_all()
            yield tb, shards
        finally:
            shards.stop()
            stop(f.links)


def judged(tb: TestbedProcess, prefix: str) -> collections.Counter[tuple[str, str]]:
    """Every reachable page fetched (the web's own log) and stored once; the fetch count of each URL."""
    truth = tb.truth(max_depth=MAX_DEPTH)
    counts = fetch_counts(tb)
    assert [u for u in truth["pages"] if counts[key(u)] == 0] == []
    check_hbase_exactly_once(prefix, truth)
    return counts


@pytest.mark.parametrize("when", ["at_once", "after_takeover"])
def test_a_killed_shard_resumed_gets_work_again_with_nothing_lost(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str, when: str
) -> None:
    prefix = f"{hbase_prefix}sr{when[0]}"
    # At once: the new process, imported ahead, runs the moment shard 2 is killed, and the lease (15 s, from a
    # 10 s heartbeat) leaves it time to reach the store on a loaded machine: it finds the killed process's
    # lease still running, claims the shard and waits the lease out; the claim keeps the peers from taking the
    # shard over at the deadline.
    beat = {"CRAWLFLEET_DISPATCH_SHARD_HEARTBEAT_S": "10.0"} if when == "at_once" else {}
    # A host delay of 0.5 s: the crawl lasts long after the restart (a minute), for the resumed shard to work.
    with crawl(rabbitmq, fleet, tmp_path, prefix, seed=36, host_delay=0.5, **beat) as (tb, shards):
        go = tmp_path / "go"
        if when == "at_once":  # imported while shard 2 still runs, started the moment it is killed
            killed, ready = shards.procs[2], start_ready(shards, 2, go, "--resume")
            shards.procs[2] = killed
        killed_at = shards.kill_when_busy(2)
        in_flight = in_flight_urls(shards.events(2))  # before the resumed process adds its own events
        if when == "after_takeover":
            wait_takeover(shards, 2)
        resumed_at = time.time()
        if when == "at_once":
            go.write_text("")
            shards.procs[2] = ready
        else:
            shards.start(2, "--resume", seeds=[])
        summaries = {i: shards.wait(i) for i in SHARDS}
        counts = judged(tb, prefix)  # nothing lost
    took = [ev for i in (0, 1) for ev in shards.events(i) if ev["ev"] == "shard_takeover"]
    assert (took != []) == (when == "after_takeover"), took
    join = [ev for ev in shards.events(2) if ev["ev"] == "recovered" and ev["t"] > resumed_at]
    assert join and join[0]["waited_s"] < 30, join  # its recovery waited for its own batches only
    assert all(k in in_flight for k in repeated(counts)), (repeated(counts), len(in_flight), killed_at)
    # The resumed shard worked again: it issued batches after its restart and ended owning hosts.
    assert issued_after(shards.events(2), resumed_at) > 0, summaries[2]
    assert summaries[2]["shard"]["index"] == 2 and summaries[2]["pages_fetched"] + summaries[2]["pages_failed"] > 0
    assert owners(prefix, shards.f.service)[2] > 0 or summaries[2]["shard"]["pulled_hosts"] > 0, summaries[2]["shard"]


def test_every_shard_stopped_and_resumed_ends_the_crawl_exactly_once(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str
) -> None:
    prefix = f"{hbase_prefix}srs"
    with crawl(rabbitmq, fleet, tmp_path, prefix, seed=37, host_delay=0.2) as (tb, shards):
        deadline = time.monotonic() + 120
        while sum(ev["ev"] == "done" for i in SHARDS for ev in shards.events(i)) < 20:
            assert time.monotonic() < deadline, "no batches answered"
            time.sleep(0.1)
        for i in SHARDS:
            shards.procs[i].terminate()
        first = {i: shards.wait(i, timeout_s=60) for i in SHARDS}
        assert any(s["fleet"]["interrupted"] for s in first.values()), first
        resumed_at = time.time()
        for i in SHARDS:
            shards.start(i, "--resume", seeds=[])
        summaries = {i: shards.wait(i) for i in SHARDS}
        counts = judged(tb, prefix)
    assert repeated(counts) == []  # a clean stop leaves nothing in flight: nothing is fetched twice
    assert sum(issued_after(shards.events(i), resumed_at) for i in SHARDS) > 0
    assert all(s["shard"]["shards"] == 3 for s in summaries.values())


def test_a_shard_added_by_restarting_every_shard_under_a_larger_count_gets_work(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str
) -> None:
    prefix = f"{hbase_prefix}sra"
    with TestbedProcess(12, 100, seed=39, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, host_delay=0.2, extra_env=shard_env(prefix, shards=2))
        shards = Shards(f)
        try:
            shards.start_all(shards=(0, 1))
            deadline = time.monotonic() + 120
            while sum(ev["ev"] == "done" for i in (0, 1) for ev in shards.events(i)) < 20:
                assert time.monotonic() < deadline, "no batches answered"
                time.sleep(0.1)
            first = {i: shards.terminate(i) for i in (0, 1)}
            assert all(s["shard"]["shards"] == 2 for s in first.values())
            stop(f.links)  # the link jobs route by the shard count too
            f.env["CRAWLFLEET_DISPATCH_SHARDS"] = "3"
            added_at = time.time()
            for i in SHARDS:  # the new shard 2 starts with --resume like the others: it has nothing to resume
                shards.start(i, "--resume", seeds=[])
            summaries = {i: shards.wait(i) for i in SHARDS}
            counts = judged(tb, prefix)
        finally:
            shards.stop()
            stop(f.links)
    assert repeated(counts) == []  # clean stops leave nothing in flight: nothing is fetched twice
    assert all(s["shard"]["shards"] == 3 for s in summaries.values())
    # The new shard worked: it issued batches and fetched pages, from hosts moved to it or claimed at home.
    assert issued_after(shards.events(2), added_at) > 0, summaries[2]["shard"]
    assert summaries[2]["pages_fetched"] > 0, summaries[2]


@pytest.mark.parametrize("quota", [False, True])
def test_continuous_shards_refetch_due_urls_at_their_owner_only(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str, quota: bool
) -> None:
    """Every shard re-crawls (``--continuous``): the URLs come back due, are fetched again conditionally, each
    host's batches issued by one shard at a time (its owner: a host's politeness is never split) and, with a
    quota file, S1's budget split among the shards held at the web. The stop file ends every shard cleanly;
    ``--resume`` of every shard goes on re-fetching."""
    from pipeline.harness.faults.quota_trial import granted_requests

    prefix = f"{hbase_prefix}src{int(quota)}"
    stop_file = tmp_path / "stop"
    recrawl = {"CONTINUOUS": "1", "STOP_FILE": str(stop_file), "INITIAL_INTERVAL_S": "1.0", "MIN_INTERVAL_S": "0.5",
               "MAX_INTERVAL_S": "8.0", "CHECK_INTERVAL_S": "0.2", "FAILED_INTERVAL_S": "1.0"}  # fmt: skip
    env = {f"CRAWLFLEET_RECRAWL_{k}": v for k, v in recrawl.items()}
    quotas = tmp_path / "quotas.toml"
    if quota:
        env["CRAWLFLEET_DISPATCH_QUOTAS_FILE"] = str(quotas)
    with TestbedProcess(9, 6, seed=38, mutate=True, mutate_rate=1.0, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, host_delay=0.3, extra_env={**shard_env(prefix), **env})
        quotas.write_text(f"[services]\n{f.service} = {PER_S}\n")
        shards = Shards(f)
        start = time.time()
        try:
            shards.start_all()
            wait_refetches(tb, shards, at_least=4)
            stop_file.write_text("")
            first = {i: shards.wait(i, timeout_s=120) for i in SHARDS}
            stop_file.unlink()
            resumed_at = time.time()
            before = len(tb.read_access_log())
            for i in SHARDS:
                shards.start(i, "--resume", seeds=[])
            wait_refetches(tb, shards, at_least=2, since=before)
            stop_file.write_text("")
            summaries = {i: shards.wait(i, timeout_s=120) for i in SHARDS}
        finally:
            shards.stop()
            stop(f.links)
        tb.wait_log_flush()
        log = [e for e in tb.read_access_log() if float(e["t"]) >= start - 1]
    pages = [e for e in log if e["path"] == "/" or e["path"].startswith("/p/")]
    per_url = collections.Counter((e["host"], e["path"]) for e in pages)
    assert sum(n >= 3 for n in per_url.values()) >= 5, "URLs fetched again and again"
    assert sum(e["status"] == 304 for e in pages) >= 5, "re-fetches were conditional"
    for s in (*first.values(), *summaries.values()):
        assert s["recrawl"]["requeued"] >= 0
    assert sum(s["recrawl"]["requeued"] for s in first.values()) > 0
    assert sum(s["recrawl"]["conditional_sent"] for s in (*first.values(), *summaries.values())) > 0
    assert sum(issued_after(shards.events(i), resumed_at) for i in SHARDS) > 0
    # One shard at a time per host: a host's politeness is never split, so no URL is re-fetched by two
    # shards at once (the spacing of a node's requests within a batch is the node's, as with one dispatcher).
    check_one_shard_at_a_time(shards)
    if quota:
        check_s1_at_the_web(granted_requests(log, set()), start)


def wait_refetches(tb: TestbedProcess, shards: Shards, *, at_least: int, since: int = 0) -> None:
    """Until ``at_least`` page URLs have been fetched three times (since access-log line ``since``)."""
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        tb.wait_log_flush()
        pages = [e for e in tb.read_access_log()[since:] if e["path"] == "/" or e["path"].startswith("/p/")]
        per_url = collections.Counter((e["host"], e["path"]) for e in pages)
        if sum(n >= 3 for n in per_url.values()) >= at_least:
            return
        for i, proc in shards.procs.items():
            assert proc.poll() is None, shards.f.log_tail(f"shard-{i}.log")
        time.sleep(0.5)
    raise AssertionError("too few re-fetches")


def check_one_shard_at_a_time(shards: Shards) -> None:
    """From the shards' events: a batch of a host issued by one shard is answered (or expired) before another
    shard issues one of the same host."""
    spans: dict[str, list[tuple[float, float, int]]] = collections.defaultdict(list)
    for i in SHARDS:
        out: dict[int, tuple[float, list[str]]] = {}
        for ev in shards.events(i):
            if ev["ev"] == "issue":
                out[ev["serial"]] = (ev["t"], ev.get("urls", []))
            elif ev["ev"] in ("done", "expired") and ev.get("serial") in out:
                t0, urls = out.pop(ev["serial"])
                for h in {key(u)[0] for u in urls}:
                    spans[h].append((t0, ev["t"], i))
        for t0, urls in out.values():
            for h in {key(u)[0] for u in urls}:
                spans[h].append((t0, float("inf"), i))
    overlaps = []
    for host, ss in spans.items():
        ss.sort()
        for (a0, a1, ai), (b0, _b1, bi) in zip(ss, ss[1:], strict=False):
            if ai != bi and b0 < a1:
                overlaps.append((host, ai, bi, a0, a1, b0))
    assert overlaps == [], overlaps[:5]
