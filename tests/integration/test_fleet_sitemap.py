"""Sitemaps in the fleet (#23 point 4): the living testbed's robots.txt ``Sitemap:`` lines and sitemap files
(a urlset; an index of a gzip and a plain part) reach the pending set through node -> segment -> link job,
so pages no page links to (``/only/{k}``) are fetched. Real RabbitMQ, a real Celery worker, the real
dispatcher (``--continuous``, ended by ``--stop-file``) and link jobs; judged from the testbed's access log."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pipeline.harness.testbed.harness import TestbedProcess

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def _key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.path)


def test_fleet_fetches_pages_only_sitemaps_list(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    # Only the re-crawl switch: the node keeps robots.txt and sitemap bodies for the link job by itself.
    env = {"CRAWLFLEET_RECRAWL_ENABLED": "1"}
    with TestbedProcess(2, 8, seed=7, mutate=True, hostile_sitemaps=False, workdir=tmp_path / "tb") as tb:
        truth = tb.web.sitemap_urls(0) + tb.web.sitemap_urls(1)
        only = {_key(tb.url(i, p)) for i in (0, 1) for p in tb.web.sitemap_only_paths(i)}
        assert truth and len(only) == 6
        f = fleet(rabbitmq, tb, extra_env=env)
        f.start_worker(1)
        f.start_dispatcher("--continuous", "--stop-file", str(stop))
        deadline = time.time() + 150
        fetched: set[tuple[str, str]] = set()
        while time.time() < deadline and not only <= fetched:
            tb.wait_log_flush()
            fetched = {
                (e["host"].split(":")[0], e["path"]) for e in tb.read_access_log() if e["status"] == 200
            }
            assert f.dispatcher is not None and f.dispatcher.poll() is None, f.log_tail("dispatcher.log")
        stop.write_text("")
        f.wait_dispatcher(timeout_s=120)  # --continuous ends cleanly on the stop file
        log = tb.read_access_log()

    assert only <= fetched, (sorted(only - fetched), f.log_tail("links.log"))
    files = {_key(u) for u in truth}
    assert files <= {(e["host"].split(":")[0], e["path"]) for e in log}, (
        "the robots.txt Sitemap: files were fetched"
    )
    gz = [e for e in log if e["path"].endswith(".xml.gz")]
    assert gz and all(e["status"] == 200 for e in gz), "the index's gzip part was fetched and read"
