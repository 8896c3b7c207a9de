"""Fleet mode end to end: real RabbitMQ, real Celery worker processes, the real dispatcher process.

Judged from the testbed's access log and the store, never from the crawler's own word:
- a fleet crawl with 2 workers reaches the same ground truth as the embedded default (every page
  exactly once, nothing outside the truth, no robots-forbidden fetch). The one difference: each node
  keeps its own robots.txt cache, so robots.txt may be fetched once per node per host;
- a worker that misses 2 heartbeat periods (SIGSTOP) gets no new batch, and gets work again when it
  comes back (SIGCONT) — S1's liveness rule.
"""

from __future__ import annotations

import collections
import signal
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pipeline.storage.sqlite import SqliteStore
from pipeline.testbed.harness import TestbedProcess
from pipeline.testbed.truth import _redirect_chain  # the testbed's own chain rule

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

MAX_DEPTH = 12


def key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else ""))


def fetch_counts(tb: TestbedProcess) -> collections.Counter[tuple[str, str]]:
    tb.wait_log_flush()
    return collections.Counter((e["host"], e["path"]) for e in tb.read_access_log())


def stored_pages(out: Path) -> tuple[collections.Counter[str], set[str]]:
    """(URL of every stored page, counted; every URL and final URL stored), through the Store API."""
    store = SqliteStore(out / "crawl.db")
    try:
        pages = list(store.iter_pages())
    finally:
        store.close()
    return collections.Counter(p.url for p in pages), {p.url for p in pages} | {p.final_url for p in pages}


def check_truth(tb: TestbedProcess, truth: dict[str, Any], *, nodes: int, allowed_twice: set[tuple[str, str]] = frozenset()) -> None:  # type: ignore[assignment]
    counts = fetch_counts(tb)
    missing = [u for u in truth["pages"] if counts[key(u)] == 0]
    twice = [u for u in truth["pages"] if counts[key(u)] > 1 and key(u) not in allowed_twice]
    assert not missing, missing[:10]
    assert not twice, twice[:10]
    for u in truth["fetch_urls"]:
        assert counts[key(u)] >= 1, u
    allowed = {key(u) for u in truth["fetch_urls"] + truth.get("redirect_hops", []) + truth["pages"]}
    extra = [k for k in counts if k not in allowed and k[1] != "/robots.txt" and not k[1].startswith("/calendar/")]
    assert not extra, extra[:10]
    assert [u for u in truth["forbidden"] if counts[key(u)]] == []
    robots = [n for (_h, p), n in counts.items() if p == "/robots.txt"]
    assert robots and max(robots) <= nodes


def with_redirects(urls: list[str]) -> list[str]:
    """``urls`` plus the later hops of their redirect chains (fetched as part of fetching them)."""
    out = list(urls)
    for url in urls:
        base = url[: url.index("/", url.index("//") + 2)]
        out += [base + hop for hop in _redirect_chain(urlsplit(url).path)]
    return out


def check_store_exactly_once(out: Path, truth: dict[str, Any]) -> None:
    counted, reached = stored_pages(out)
    assert [u for u, n in counted.items() if n > 1] == []
    missing = [u for u in truth["pages"] if u not in reached]
    assert not missing, missing[:10]


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
        f.kill_worker(a, signal.SIGSTOP)
        dead = f.wait_event(lambda ev: ev["ev"] == "node_dead" and ev["node"] == a)
        time.sleep(2.0)  # the crawl goes on without it for a while
        f.kill_worker(a, signal.SIGCONT)
        back = f.wait_event(lambda ev: ev["ev"] == "node_back" and ev["node"] == a)
        summary = f.wait_dispatcher()
        events = f.events()
        while_dead = [ev for ev in events if ev["ev"] == "issue" and dead["t"] <= ev["t"] < back["t"]]
        assert while_dead and {ev["node"] for ev in while_dead} == {b}, "only the live node got work"
        assert any(ev["ev"] == "issue" and ev["node"] == a and ev["t"] >= back["t"] for ev in events), "work again"
        truth = tb.truth(max_depth=MAX_DEPTH)
        # A batch the stopped node held was re-issued to the other one; its in-flight requests may
        # have reached the server before the stop, so only those URLs may show twice in the log.
        expired = {key(u) for ev in events if ev["ev"] == "expired" for u in with_redirects(ev["urls"])}
        check_truth(tb, truth, nodes=2, allowed_twice=expired)
        check_store_exactly_once(f.out, truth)
        assert summary["store"]["pending"] == 0
