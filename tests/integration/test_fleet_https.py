"""A fleet crawl (real RabbitMQ, two Celery workers, the dispatcher, the link jobs) of the testbed's https
web: the nodes trust the testbed's CA through fetch.tls_ca_bundle only; judged from the testbed's access
log (tests/fixtures/tlsweb.py), bad-certificate hosts recorded with their classes in the store. The nodes
fetch on uvloop (fetch.event_loop), and say so when they make their fetcher."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from tests.fixtures.rabbitmq import MAX_DEPTH
from tests.fixtures.tlsweb import check_bad_certs_recorded, check_https_truth, seeds

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


class _HttpsSeeds:
    """The testbed as the Fleet helper reads it, seeded over https (and the redirecting http seeds)."""

    def __init__(self, tb: TestbedProcess) -> None:
        self.seeds = seeds(tb)
        self.dns_port = tb.dns_port


def test_fleet_https_crawl_matches_ground_truth(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    with TestbedProcess(12, 30, seed=9, tls=True, plain_http="redirect", workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, _HttpsSeeds(tb), max_depth=MAX_DEPTH,
                  extra_env={"CRAWLFLEET_FETCH_TLS_CA_BUNDLE": tb.ca_file, "CRAWLFLEET_FETCH_EVENT_LOOP": "uvloop"})  # fmt: skip
        nodes = [f.start_worker(1), f.start_worker(2)]
        f.start_dispatcher()
        summary = f.wait_dispatcher()
        check_https_truth(tb, tb.truth(max_depth=MAX_DEPTH, scheme="https"), nodes=2)
        check_bad_certs_recorded(f.out / "crawl.db", tb)
        assert summary["store"]["pending"] == 0
        for node in nodes:
            assert f"node {node}: H1Fetcher for a new scope (1 in this process) on uvloop" in f.log_tail(
                f"worker-{node}.log", 10**6
            )
