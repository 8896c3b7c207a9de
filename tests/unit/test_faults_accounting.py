"""The fault accounting's in-flight rule, on hand-made logs (pipeline/harness/faults/accounting.py)."""

from __future__ import annotations

from pipeline.harness.faults.accounting import LOG_LAG_S, FaultTimes, account

TRUTH = {"pages": ["http://a.test/p/1", "http://a.test/p/2", "http://a.test/p/3"]}
STORED = set(TRUTH["pages"])


def _log(*entries: tuple[float, str]) -> list[dict[str, object]]:
    return [{"t": t, "host": "a.test", "path": path, "status": 200} for t, path in entries]


def test_a_request_logged_just_after_the_fault_was_in_flight_not_a_duplicate() -> None:
    fault = 100.0
    log = _log((99.0, "/p/1"), (fault + LOG_LAG_S / 4, "/p/2"), (fault + 1.0, "/p/2"), (fault + 2.0, "/p/1"),
               (fault + 0.5, "/p/3"))  # fmt: skip
    acc = account(truth=TRUTH, log=log, journaled_at_fault=set(), stored_urls=STORED,
                  times=FaultTimes(fault, fault + 0.5))  # fmt: skip
    # /p/1 asked before the fault, /p/2 logged within the server's lag after it: both in flight
    assert acc.duplicated == 0 and acc.in_flight_repeats == 2


def test_a_request_logged_well_after_the_fault_and_asked_again_is_a_duplicate() -> None:
    fault = 100.0
    log = _log((fault + 0.8, "/p/2"), (fault + 1.5, "/p/2"), (1.0, "/p/1"), (2.0, "/p/3"))
    acc = account(truth=TRUTH, log=log, journaled_at_fault=set(), stored_urls=STORED,
                  times=FaultTimes(fault, fault + 0.5))  # fmt: skip
    assert acc.duplicated == 1 and acc.duplicated_sample == ["a.test/p/2"]


def test_a_journaled_page_asked_again_after_the_fault_is_a_duplicate_whatever_the_lag() -> None:
    fault = 100.0
    log = _log((99.9, "/p/1"), (fault + LOG_LAG_S / 4, "/p/1"), (1.0, "/p/2"), (2.0, "/p/3"))
    acc = account(truth=TRUTH, log=log, journaled_at_fault={("a.test", "/p/1")}, stored_urls=STORED,
                  times=FaultTimes(fault, fault + 0.5))  # fmt: skip
    assert acc.duplicated == 1
