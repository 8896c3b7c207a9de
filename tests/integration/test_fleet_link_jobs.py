"""The design card's loop, end to end on real processes: nodes store their own pages and reply once per
batch without bodies; the link jobs (``crawlfleet links``) feed the pending set; the dispatcher never
sees a body.

Judged from the testbed's access log (every reachable page fetched exactly once), from the store
(every page stored once), from the broker's byte counts (no bodies on it) and from the node segments
(every segment processed by the jobs).
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.hbase import HBaseStore
from tests.fixtures.hbase import HOST, PORT
from tests.fixtures.rabbitmq import MAX_DEPTH, check_store_exactly_once, check_truth, fetch_counts

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def stop(proc: subprocess.Popen[Any]) -> int:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    return proc.wait(60)


def check_hbase_exactly_once(prefix: str, truth: dict[str, Any]) -> None:
    store = HBaseStore(HOST, PORT, prefix=prefix)
    try:
        counted = collections.Counter(p.url for p in store.iter_pages())
        reached = set(counted) | {p.final_url for p in store.iter_pages()}
        assert store.pending_hosts() == []  # the pending set itself, not the (drifting) counters
    finally:
        store.close()
    assert [u for u, n in counted.items() if n > 1] == []
    assert [u for u in truth["pages"] if u not in reached] == []


@pytest.mark.parametrize("store", ["sqlite", "hbase"])
def test_nodes_store_pages_and_the_link_jobs_feed_the_frontier(
    rabbitmq: str, fleet: Any, tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    env: dict[str, str] = {}
    prefix = ""
    if store == "hbase":
        prefix = f"{request.getfixturevalue('hbase_prefix')}lk"
        env |= {"CRAWLFLEET_STORE_KIND": "hbase", "CRAWLFLEET_STORE_HBASE_PREFIX": prefix}
    with TestbedProcess(12, 40, seed=21, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, extra_env=env)
        f.start_worker(1)
        f.start_worker(2)
        f.start_dispatcher()  # and the link jobs
        links = f.links
        assert links is not None
        try:
            summary = f.wait_dispatcher(timeout_s=300)
        finally:
            assert stop(links) == 0, f.log_tail("links.log")
        truth = tb.truth(max_depth=MAX_DEPTH)
        check_truth(tb, truth, nodes=2)
        # The nodes share robots.txt answers through the store (fetchers.robots; hbase_robots.py, or beside a
        # SQLite crawl db sqlite_robots.py): a host whose URLs both nodes fetched still had its robots.txt
        # fetched once (without the share: 2 each).
        robots = {h: n for (h, p), n in fetch_counts(tb).items() if p == "/robots.txt"}
        assert robots and max(robots.values()) == 1, sorted(robots.items())
        if store == "hbase":
            check_hbase_exactly_once(prefix, truth)
        else:
            check_store_exactly_once(f.out, truth)
            assert summary["store"]["pending"] == 0
        # No bodies crossed the broker: the replies average well under a kilobyte per URL.
        fleet_counters = summary["fleet"]
        fetched = summary["pages_fetched"] + summary["pages_failed"]
        assert fetched > 0 and fleet_counters["results_bytes"] / fetched < 1000, fleet_counters
        # Every node segment went through the jobs and was deleted once reported (fleet.segment_retention_s
        # = 0: the pages are in the store, so bodies are stored once); none is left unprocessed.
        segments = f.out / "node-segments"
        left = list(segments.rglob("*.jsonl*"))
        assert segments.is_dir() and not left, left
        events = f.events()
        assert sum(ev["new"] for ev in events if ev["ev"] == "links") + len(tb.seeds) >= len(truth["pages"])
        # The dispatcher wrote no page: each stored page came with a node's serial, and its own journal
        # holds no body (the nodes' segments do).
        journal = b"".join(p.read_bytes() for p in (f.out / "segments").glob("segment-*.jsonl"))
        assert b'"body_lz4":"' not in journal.replace(b'"body_lz4":""', b"")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("runner", ["spark", "hadoop"])
def test_the_link_jobs_on_spark_and_hadoop(rabbitmq: str, fleet: Any, tmp_path: Path, runner: str,
                                           request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same loop with the link jobs on a real Spark (local[2]) and Hadoop streaming (local mode, also
    when the YARN daemons run).

    Each round starts JVMs (~20 s on Spark), and a crawl needs about one round per level of depth, so
    this web is kept shallow."""
    request.getfixturevalue(f"{runner}_ready")
    monkeypatch.setenv("CRAWLFLEET_CLUSTER_HADOOP_MODE", "local")
    depth = 3
    with TestbedProcess(5, 16, seed=22, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=depth)
        f.start_worker(1)
        links = f.start_links(runner=runner)
        f.start_dispatcher()
        try:
            summary = f.wait_dispatcher(timeout_s=600)
        finally:
            assert stop(links) == 0, f.log_tail("links.log")
        truth = tb.truth(max_depth=depth)
        check_truth(tb, truth, nodes=1)
        check_store_exactly_once(f.out, truth)
        assert summary["store"]["pending"] == 0
        assert any(ev["ev"] == "links" and ev["new"] > 0 for ev in f.events())
