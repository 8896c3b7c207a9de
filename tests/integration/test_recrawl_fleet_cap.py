"""A continuous fleet crawl with ``scope.max_pages_per_host`` keeps re-fetching its capped hosts, on both
crawl dbs: real RabbitMQ, a real Celery worker, the real dispatcher and link jobs, SQLite or real HBase
(where a capped host's refill reads the refetch index ``requeue_due`` keeps).
Judged from the living testbed's access log (no host asked for more distinct pages than the cap, each
re-fetched after its last new one; a restarted dispatcher, ``--resume``, re-fetches the capped hosts
again and asks for no new URL) and from the store (every host took exactly the cap).

Before, the cap counted fetches and a capped host was never leased again: a continuous crawl stopped
refreshing every capped host.

Each run lasts until the access log shows what the verdict asks for, however long the crawl takes to get
there on a busy machine: in a fleet every re-fetch waits for the link round that schedules it, and a round
can take seconds (here a hostile sitemap adds 35,000 URLs in one). The first run waits for re-fetches
after each host's last new path (any path but robots.txt: a sitemap file found late counts too), which is
what the verdict counts after its last new page; waiting for re-fetches since the start let a host's
retries of its failing pages, made before its last new page, stand in for them."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Container
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


def _after_last_new(
    log: list[dict[str, Any]], *, skip: Container[tuple[str, str]] = ()
) -> collections.Counter[str]:
    """Per host, its requests (robots.txt left out) after the last request for a path it had not been asked
    for before; ``skip``: (host, path) pairs that are not pages (the sitemap files), neither new pages nor
    counted. With no ``skip`` a late sitemap file counts as the host's last new path: never fewer requests
    after it than after the host's last new page."""
    out: collections.Counter[str] = collections.Counter()
    seen: set[tuple[str, str]] = set()
    for e in sorted(log, key=lambda e: float(e["t"])):
        key = (e["host"], e["path"])
        if e["path"] == "/robots.txt":
            continue
        if key in seen:
            out[e["host"]] += 1
        elif key not in skip:
            out[e["host"]] = 0
        seen.add(key)
    return out


def _crawl_until(
    f: Any, tb: TestbedProcess, stop: Path, *, enough: Callable[[list[dict[str, Any]]], bool],
    extra: tuple[str, ...] = (),
) -> None:  # fmt: skip
    """Run the dispatcher until the access log is ``enough``, then stop it by its stop file. The bound
    is only there so a crawl that never gets there fails instead of hanging."""
    stop.unlink(missing_ok=True)
    f.start_dispatcher(*extra)
    deadline = time.monotonic() + 300
    while not enough(_log(tb)):
        assert time.monotonic() < deadline, ("never enough re-fetches", f.log_tail("dispatcher.log"))
        assert f.dispatcher is not None and f.dispatcher.poll() is None, f.log_tail("dispatcher.log")
        time.sleep(0.5)
    stop.write_text("")
    f.wait_dispatcher(timeout_s=120)


def _log(tb: TestbedProcess) -> list[dict[str, Any]]:
    tb.wait_log_flush()
    return list(tb.read_access_log())


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

        def refetched(log: list[dict[str, Any]]) -> bool:
            got = _after_last_new([e for e in log if float(e["t"]) >= start])
            return len(got) == HOSTS and min(got.values()) >= 10

        _crawl_until(f, tb, tmp_path / "stop", enough=refetched)
        resumed = time.time()

        def refetched_again(log: list[dict[str, Any]]) -> bool:
            got = _repeats(log, since=resumed)
            return len(got) == HOSTS and min(got.values()) >= 5

        _crawl_until(f, tb, tmp_path / "stop", enough=refetched_again, extra=("--resume",))
        log = [e for e in _log(tb) if float(e["t"]) >= start]

        db = from_spec(spec or f"sqlite:{f.out}")
        try:
            taken = db.taken_per_host()
            port = urlsplit(tb.seeds[0]).port
            infra = {(h, p) for h, p in {(e["host"], e["path"]) for e in log}
                     if (r := db.get_url(f"http://{h}:{port}{p}")) is not None and r.infra}  # fmt: skip
        finally:
            db.close()

    # Every host took the cap (URLs robots.txt denies count, and make no request), and was asked for no
    # more distinct pages than that; the sitemap files (the link job marks an index's files as such) were
    # fetched beside them, an index's files once the host was capped among them, and each host's
    # robots.txt by the fetcher (never a crawl URL).
    assert len(taken) == HOSTS and set(taken.values()) == {CAP}, taken
    assert {p for _, p in infra} >= {"/sitemap_index.xml", "/sitemaps/0.xml.gz", "/sitemaps/1.xml"}, infra
    assert "/robots.txt" not in {p for _, p in infra}
    pages = [e for e in log if (e["host"], e["path"]) not in infra and e["path"] != "/robots.txt"]
    new_paths = _new_paths(pages)
    assert len(new_paths) == HOSTS and max(len(t) for t in new_paths.values()) <= CAP, new_paths
    assert {e["host"] for e in log if e["path"] == "/robots.txt"} == set(new_paths)
    # After its last new page each host went on being re-fetched; the resumed dispatcher took no new URL.
    after = _after_last_new([e for e in log if float(e["t"]) < resumed], skip=infra)
    assert len(after) == HOSTS and min(after.values()) >= 10, after
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
        new_paths = _new_paths(
            [e for e in log if (e["host"], e["path"]) not in infra and e["path"] != "/robots.txt"]
        )
    assert summary["store"]["pending"] > 0  # the capped hosts' other URLs, kept for a higher cap
    assert len(new_paths) == HOSTS and max(len(t) for t in new_paths.values()) <= CAP
    assert not infra  # a static web: no sitemap; robots.txt, fetched beside the cap's pages, is no crawl URL
    assert {e["host"] for e in log if e["path"] == "/robots.txt"} == set(new_paths)
