"""The accounting's rule for repeats, on hand-made access logs: a repeat is excused only if the killed
process itself had the request in flight (pipeline.harness.faults.accounting.Killed); the time window
alone excuses nothing once the trial names the killed process.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.harness.faults.accounting import FaultTimes, Killed, account

pytestmark = pytest.mark.faults

TRUTH = {"pages": ["http://a.test/1", "http://a.test/2"]}
TIMES = FaultTimes(fault_t=10.0, back_t=11.0, end_t=20.0)


def entry(t: float, path: str, status: int = 200) -> dict[str, Any]:
    return {"t": t, "host": "a.test", "path": path, "status": status}


# /1 asked just before the fault, never journaled, asked again after it; /2 fetched once.
LOG = [entry(9.9, "/1"), entry(9.95, "/2"), entry(12.0, "/1")]
STORED = {"http://a.test/1", "http://a.test/2"}


def test_window_alone_excuses_a_repeat() -> None:
    acc = account(truth=TRUTH, log=LOG, journaled_at_fault=set(), stored_urls=STORED, times=TIMES)
    assert (acc.duplicated, acc.in_flight_repeats) == (0, 1)


def test_a_killed_process_that_fetches_nothing_excuses_nothing() -> None:
    acc = account(truth=TRUTH, log=LOG, journaled_at_fault=set(), stored_urls=STORED, times=TIMES,
                  killed=Killed.fetches_nothing("dispatcher"))  # fmt: skip
    assert (acc.duplicated, acc.in_flight_repeats) == (1, 0)
    assert acc.duplicated_sample == ["a.test/1"] and acc.killed == "dispatcher" and acc.excused == {}


def test_only_the_killed_process_own_requests_are_excused() -> None:
    log = [*LOG, entry(12.5, "/2")]  # /2 asked again too, but the killed worker never had it
    acc = account(truth=TRUTH, log=log, journaled_at_fault=set(), stored_urls=STORED, times=TIMES,
                  killed=Killed("worker", frozenset({("a.test", "/1")})))  # fmt: skip
    assert (acc.duplicated, acc.in_flight_repeats) == (1, 1)
    assert acc.duplicated_sample == ["a.test/2"] and acc.excused == {"in_flight_on_worker": 1}


def test_a_journaled_url_asked_again_is_a_duplicate_even_on_the_killed_process() -> None:
    acc = account(truth=TRUTH, log=LOG, journaled_at_fault={("a.test", "/1")}, stored_urls=STORED, times=TIMES,
                  killed=Killed("worker", frozenset({("a.test", "/1")})))  # fmt: skip
    assert (acc.duplicated, acc.in_flight_repeats) == (1, 0)
