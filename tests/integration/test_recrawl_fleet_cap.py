"""A continuous fleet crawl with ``scope.max_pages_per_host`` keeps re-fetching its capped hosts, on both
crawl dbs: real RabbitMQ, a real Celery worker, the real dispatcher and link jobs, SQLite or real HBase
(where a capped host's refill reads the refetch index ``requeue_due`` keeps).
Judged from the living testbed's access log (no host asked for more distinct pages than the cap, each
re-fetched after its last new one; a restarted dispatcher, ``--resume``, re-fetches the capped hosts
again and asks for no new URL) and from the store (every host took exactly the cap).

Before, the cap counted fetches and a capped host was never leased again: a continuous crawl stopped
refreshing every capped host."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.factory import from_spec

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

CAP, HOSTS = 6, 3


def _new_paths(log: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per host, the time of each request for a path it had not been asked for before."""
    seen: set[tuple[str, str]] = set()
    out: dict[str, list[float]] = collections.defaultdict(list)
    for e in sorted(log, key=lambda e: float(e["t"])):
        if (e["host"], e["path"]) not in seen:
            seen.add((e["host"], e["path"]))
            out[e["host"]].append(float(e["t"]))
    return out


def _repeats(log: list[dict[str, Any]], *, since: float) -> collections.Counter[str]:
    """Per host, requests since ``since`` for a path it had been asked for before (re-fetches and retries;
    robots.txt, which politeness fetches anyway, left out)."""
    seen: set[tuple[str, str]] = set()
    out: collections.Counter[str] = collections.Counter()
    for e in sorted(log, key=lambda e: float(e["t"])):
        key = (e["host"], e["path"])
        if key in seen and float(e["t"]) >= since and e["path"] != "/robots.txt":
            out[e["host"]] += 1
        seen.add(key)
    return out


def _crawl_until(
    f: Any, tb: TestbedProcess, stop: Path, *, since: float, each: int, extra: tuple[str, ...] = ()
) -> None:
    stop.unlink(missing_ok=True)
    f.start_dispatcher(*extra)
    deadline = time.time() + 120
    while time.time() < deadline:
        tb.wait_log_flush()
        got = _repeats(tb.read_access_log(), since=since)
        if len(got) == HOSTS and min(got.values()) >= each:
            break
        assert f.dispatcher is not None and f.dispatcher.poll() is None, f.log_tail("dispatcher.log")
        time.sleep(0.5)
    stop.write_text("")
    f.wait_dispatcher(timeout_s=120)


@pytest.mark.parametrize("store", ["sqlite", "hbase"])
def test_a_continuous_fleet_crawl_keeps_refetching_its_capped_hosts(
    rabbitmq: str, fleet: Any, tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    recrawl = {"CONTINUOUS": "1", "STOP_FILE": str(tmp_path / "stop"), "INITIAL_INTERVAL_S": "1.0",
               "MIN_INTERVAL_S": "0.5", "MAX_INTERVAL_S": "4.0", "CHECK_INTERVAL_S": "0.2",
               "FAILED_INTERVAL_S": "1.0"}  # fmt: skip
    env = {f"CRAWLFLEET_RECRAWL_{k}": v for k, v in recrawl.items()}
    env["CRAWLFLEET_SCOPE_MAX_PAGES_PER_HOST"] = str(CAP)
    spec = ""
    if store == "hbase":
        thrift_host, thrift_port = request.getfixturevalue("hbase_thrift")
        prefix = f"{request.getfixturevalue('hbase_prefix')}cap"
        env |= {"CRAWLFLEET_STORE_KIND": "hbase", "CRAWLFLEET_STORE_HBASE_PREFIX": prefix}
        spec = f"hbase://{thrift_host}:{thrift_port}/{prefix}"
    with TestbedProcess(HOSTS, 30, seed=5, mutate=True, mutate_rate=1.0, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, extra_env=env)
        f.start_worker(1)
        start = time.time()
        _crawl_until(f, tb, tmp_path / "stop", since=start, each=10)
        resumed = time.time()
        _crawl_until(f, tb, tmp_path / "stop", since=resumed, each=5, extra=("--resume",))
        tb.wait_log_flush()
        log = [e for e in tb.read_access_log() if float(e["t"]) >= start]

        db = from_spec(spec or f"sqlite:{f.out}")
        try:
            taken = db.taken_per_host()
            port = urlsplit(tb.seeds[0]).port
            infra = {(h, p) for h, p in {(e["host"], e["path"]) for e in log}
                     if (r := db.get_url(f"http://{h}:{port}{p}")) is not None and r.infra}  # fmt: skip
        finally:
            db.close()

    # Every host took the cap (URLs robots.txt denies count, and make no request), and was asked for no
    # more distinct pages than that; robots.txt and the sitemap files (the link job marks an index's
    # files as such) were fetched beside them, an index's files once the host was capped among them.
    assert len(taken) == HOSTS and set(taken.values()) == {CAP}, taken
    assert {p for _, p in infra} >= {"/robots.txt", "/sitemap_index.xml", "/sitemaps/0.xml.gz", "/sitemaps/1.xml"}
    new_paths = _new_paths([e for e in log if (e["host"], e["path"]) not in infra])
    assert len(new_paths) == HOSTS and max(len(t) for t in new_paths.values()) <= CAP, new_paths
    # After its last new URL each host went on being re-fetched; the resumed dispatcher took no new URL.
    for host, times in new_paths.items():
        after = [e for e in log if e["host"] == host and times[-1] < float(e["t"]) < resumed]
        assert len([e for e in after if e["path"] != "/robots.txt"]) >= 10, (host, len(after))
    assert max(t[-1] for t in new_paths.values()) < resumed
    assert min(_repeats(log, since=resumed).values()) >= 5


def test_a_recrawl_fleet_crawl_with_a_host_cap_ends(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    """Re-crawling on, not continuous: the crawl ends once nothing is pending. Capped hosts keep new URLs
    PENDING in the store; before the dispatcher's end-of-crawl re-read counted only their due URLs, it
    restored the new ones at every check and the crawl never ended."""
    env = {"CRAWLFLEET_RECRAWL_ENABLED": "1", "CRAWLFLEET_RECRAWL_INITIAL_INTERVAL_S": "3600",
           "CRAWLFLEET_SCOPE_MAX_PAGES_PER_HOST": str(CAP)}  # fmt: skip
    with TestbedProcess(HOSTS, 30, seed=5, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, extra_env=env)
        f.start_worker(1)
        f.start_dispatcher()
        summary = f.wait_dispatcher(timeout_s=120)
        tb.wait_log_flush()
        log = tb.read_access_log()
        db = from_spec(f"sqlite:{f.out}")
        try:
            port = urlsplit(tb.seeds[0]).port
            infra = {(e["host"], e["path"]) for e in log
                     if (r := db.get_url(f"http://{e['host']}:{port}{e['path']}")) is not None and r.infra}  # fmt: skip
        finally:
            db.close()
        new_paths = _new_paths([e for e in log if (e["host"], e["path"]) not in infra])
    assert summary["store"]["pending"] > 0  # the capped hosts' other URLs, kept for a higher cap
    assert len(new_paths) == HOSTS and max(len(t) for t in new_paths.values()) <= CAP
    assert {p for _, p in infra} == {"/robots.txt"}  # fetched beside the cap's pages (a static web: no sitemap)
