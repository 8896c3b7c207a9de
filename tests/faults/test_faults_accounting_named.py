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


class _Events:
    """The one thing worker_in_flight reads of a FleetRig: the dispatcher's events."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._events = events

    def events(self) -> list[dict[str, Any]]:
        return self._events


def test_an_expired_batch_excuses_only_its_urls_unanswered_at_the_expiry() -> None:
    from pipeline.harness.faults.fleet_trials import worker_in_flight

    rig = _Events([
        {"ev": "expired", "node": "n1", "t": 9.0, "urls": ["http://a.test/0"], "unanswered": ["http://a.test/0"]},
        {"ev": "expired", "node": "n1", "t": 11.0, "urls": ["http://a.test/1", "http://a.test/r/2"],
         "unanswered": ["http://a.test/r/2"]},
        {"ev": "expired", "node": "n2", "t": 11.0, "urls": ["http://a.test/2"], "unanswered": ["http://a.test/2"]},
    ])  # fmt: skip
    killed = worker_in_flight(rig, "n1", 10.0)  # type: ignore[arg-type]
    # /1 was answered before its batch expired: fetching it again is a duplicate. The batch expired
    # before the fault, and node n2's, excuse nothing either.
    assert killed.in_flight == {("a.test", "/r/2")}  # a node stops at the redirect: /r2/2 is a URL of its own
    log = [entry(9.0, "/1"), entry(12.0, "/1")]
    acc = account(
        truth=TRUTH, log=log, journaled_at_fault=set(), stored_urls=STORED, times=TIMES, killed=killed
    )
    assert (acc.duplicated, acc.in_flight_repeats) == (1, 0)


def test_a_redirect_stopped_at_does_not_count_its_target_as_journaled() -> None:
    from pipeline.harness.faults.accounting import journaled_keys

    stopped = {"url": "http://a.test/r/0", "final_url": "http://a.test/r2/0", "status": 301,
               "redirects": ["http://a.test/r/0"]}  # fmt: skip
    followed = {"url": "http://a.test/r/1", "final_url": "http://a.test/moved/1", "status": 200,
                "redirects": ["http://a.test/r/1", "http://a.test/r2/1"]}  # fmt: skip
    assert journaled_keys([stopped]) == {("a.test", "/r/0")}
    assert journaled_keys([followed]) == {("a.test", "/r/1"), ("a.test", "/r2/1"), ("a.test", "/moved/1")}
