"""``crawlfleet worker --fetcher threaded`` (#21 point 8): a fleet node on the requests-futures fetcher
crawls the testbed like an aio node, judged from the testbed's access log and the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from tests.fixtures.rabbitmq import MAX_DEPTH, check_store_exactly_once, check_truth

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_a_threaded_node_crawls_every_page_once(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    with TestbedProcess(8, 25, seed=12, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH)
        f.start_worker(1, fetcher="threaded")
        f.start_dispatcher()
        summary = f.wait_dispatcher()
        truth = tb.truth(max_depth=MAX_DEPTH)
        check_truth(tb, truth, nodes=1)
        check_store_exactly_once(f.out, truth)
        assert summary["store"]["pending"] == 0
        assert f"node {f.node(1)}: ThreadedFetcher for a new scope" in f.log_tail(f"worker-{f.node(1)}.log", 200_000)
