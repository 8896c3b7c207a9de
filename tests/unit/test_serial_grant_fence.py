"""Grants end with their quota minute: the serial check's answer says so, and the node's fence stops
starting URLs of a batch at its grant's minute end (less the guard); on an injected wall clock."""

from __future__ import annotations

import json
import time

from pipeline.transport.wire.serialcheck import GRANT_GUARD_S, SerialChecker, answer, grant_end, grant_fence

M0 = 1_800_000_000.0 - (1_800_000_000 % 60)  # the start of a minute


def test_grant_end_is_the_end_of_the_issue_minute() -> None:
    assert grant_end(M0) == M0 + 60
    assert grant_end(M0 + 59.99) == M0 + 60
    assert grant_end(M0 + 60) == M0 + 120


def test_the_fence_closes_at_the_minute_end_less_the_guard_and_keeps_the_inner_fence() -> None:
    now = [M0 + 59.5]
    inner = [True]
    fence = grant_fence(M0 + 59.4, lambda: inner[0], wall=lambda: now[0])
    assert fence()
    inner[0] = False
    assert not fence()  # the lease fence still applies
    inner[0] = True
    now[0] = M0 + 60 - GRANT_GUARD_S
    assert not fence()
    now[0] = M0 + 61
    assert not fence()  # a batch that waited into the next minute is handed back whole


def test_answers_say_minute_bound_only_when_the_table_is() -> None:
    body = json.dumps({"serial": 3, "fetcher": "n#0"}).encode()
    held = {3: "n#0"}
    assert answer(body, held.get) == {"serial": 3, "held": True}
    assert answer(body, held.get, minute_bound=True) == {"serial": 3, "held": True, "minute": True}
    assert "error" in answer(b"[", held.get, minute_bound=True)


def test_the_checker_fences_by_the_last_answer() -> None:
    c = SerialChecker("amqp://guest:guest@127.0.0.1:1/")  # never connects in this test
    inner = lambda: True  # noqa: E731
    past = time.time() - 120  # the checker's fence reads the real wall clock
    assert c.fence(past, inner) is inner  # no quota said: the lease fence alone
    c.minute_bound = True
    assert not c.fence(past, inner)()  # its minute is long over
