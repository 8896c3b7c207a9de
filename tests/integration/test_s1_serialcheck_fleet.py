"""S1's serial-id check on a real fleet: a node does not fetch a batch the dispatcher's table says is
no longer its own. The dispatcher's own responder is switched off and the test answers the checks from
a table that holds nothing (every batch "expired or re-issued"): the node hands every batch back
unfetched, which the testbed's access log shows (no page request), and the dispatcher re-queues them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.transport.wire.serialcheck import SerialResponder, SerialTable
from tests.fixtures.rabbitmq import MAX_DEPTH

pytestmark = [pytest.mark.integration]


def test_a_revoked_batch_is_not_fetched_by_its_old_holder(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    with TestbedProcess(4, 10, seed=12, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH)
        table = SerialTable()  # holds nothing: every check is answered "revoked"
        responder = SerialResponder(rabbitmq, f.service, table).start()
        try:
            assert responder.ready.wait(30)
            f.start_worker(1, slots=2)
            f.env = dict(f.env, CRAWLFLEET_DISPATCH_SERIAL_CHECK="false")  # the dispatcher's responder off
            before = len(tb.read_access_log())
            f.start_dispatcher()
            f.wait_event(lambda ev: ev["ev"] == "done", timeout_s=120)
            f.wait_event(lambda ev: ev["ev"] == "issue" and ev["serial"] >= 4, timeout_s=60)  # handed back, again
            time.sleep(1.0)
        finally:
            responder.stop()
            if f.dispatcher is not None:
                f.dispatcher.terminate()
                f.dispatcher.communicate(timeout=60)
        tb.wait_log_flush()
        pages = [e for e in tb.read_access_log()[before:] if e["path"] != "/robots.txt"]
        assert pages == [], pages[:3]  # not one page fetched from a revoked batch
        done = [ev for ev in f.events() if ev["ev"] == "done"]
        assert done and all(ev["pages"] == 0 and ev["unfinished"] > 0 for ev in done), done[:3]
        assert responder.answered >= len(done)
        assert "handed back unfetched" in f.log_tail(f"worker-{f.node(1)}.log", 200_000)
