"""A fleet crawl runs continuously against the living testbed (#23): real RabbitMQ, a real Celery worker,
the real dispatcher and link jobs. The link jobs' crawl-db update schedules what the node fetched, the
dispatcher moves due URLs back to pending and sends them with their validators, the node's 304s keep the
stored pages; the stop file ends the crawl. Judged from the testbed's access log and the store."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.storage.sqlite import SqliteStore

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_fleet_continuous_crawl_refetches_until_the_stop_file(
    rabbitmq: str, fleet: Any, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    recrawl = {"CONTINUOUS": "1", "STOP_FILE": str(stop), "INITIAL_INTERVAL_S": "1.0", "MIN_INTERVAL_S": "0.5",
               "MAX_INTERVAL_S": "8.0", "CHECK_INTERVAL_S": "0.2", "FAILED_INTERVAL_S": "1.0"}  # fmt: skip
    env = {f"CRAWLFLEET_RECRAWL_{k}": v for k, v in recrawl.items()}
    with TestbedProcess(4, 6, seed=5, mutate=True, mutate_rate=1.0, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, extra_env=env)
        f.start_worker(1)
        f.start_dispatcher()
        deadline = time.time() + 150
        pages: list[dict[str, Any]] = []
        while time.time() < deadline:
            tb.wait_log_flush()
            pages = [e for e in tb.read_access_log() if e["path"] == "/" or e["path"].startswith("/p/")]
            per_url = collections.Counter((e["host"], e["path"]) for e in pages)
            if sum(e["status"] == 304 for e in pages) >= 10 and sum(n >= 3 for n in per_url.values()) >= 5:
                break
            assert f.dispatcher is not None and f.dispatcher.poll() is None, f.log_tail("dispatcher.log")
            time.sleep(0.5)
        stop.write_text("")
        summary = f.wait_dispatcher(timeout_s=120)

    per_url = collections.Counter((e["host"], e["path"]) for e in pages)
    assert sum(n >= 3 for n in per_url.values()) >= 5, "URLs fetched again and again"
    assert sum(e["status"] == 304 for e in pages) >= 10, "re-fetches were conditional"
    assert summary["recrawl"]["requeued"] > 0 and summary["recrawl"]["conditional_sent"] > 0
    store = SqliteStore(f.out / "crawl.db")
    try:
        home = store.get_revisit(tb.seeds[0])
        assert home is not None and home.fetches >= 2 and home.digest
        page = store.get_page(tb.seeds[0])
        assert page is not None and page.body  # a 304 never replaced the stored copy with an empty one
    finally:
        store.close()
