"""S1's serial-id check on real RabbitMQ: the dispatcher's responder thread answers a node's checks
from its serial table (held / revoked), and a node whose dispatcher does not answer fails open."""

from __future__ import annotations

import pytest

from pipeline.transport.wire.serialcheck import (
    HELD,
    REVOKED,
    UNANSWERED,
    SerialChecker,
    SerialResponder,
    SerialTable,
)

pytestmark = [pytest.mark.integration]


def test_a_node_learns_whether_its_batch_is_still_its_own(rabbitmq: str) -> None:
    table = SerialTable()
    responder = SerialResponder(rabbitmq, "svc-check", table).start()
    checker = SerialChecker(rabbitmq, timeout_s=10.0)
    try:
        assert responder.ready.wait(30)
        table.issue(41, "node-a#0")
        assert checker.check("svc-check", 41, "node-a#0") == HELD
        assert checker.check("svc-check", 41, "node-b#3") == REVOKED  # the batch was re-issued to another node
        table.replace([])  # expired at the dispatcher's tick
        assert checker.check("svc-check", 41, "node-a#0") == REVOKED
        assert checker.stats.checks == 3 and checker.stats.revoked == 2
        assert responder.answered == 3
    finally:
        responder.stop()
        checker.close()


def test_no_answer_fails_open_and_pauses_the_checks(rabbitmq: str) -> None:
    checker = SerialChecker(rabbitmq, timeout_s=0.5)
    try:
        assert checker.check("svc-nobody-answers", 1, "n#0") == UNANSWERED  # the batch is fetched
        assert checker.check("svc-nobody-answers", 2, "n#0") == UNANSWERED
        assert checker.stats.unanswered == 1 and checker.stats.skipped == 1  # no second timeout paid
    finally:
        checker.close()
