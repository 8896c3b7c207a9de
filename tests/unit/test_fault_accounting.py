"""The fault judge (pipeline.harness.faults.accounting) on hand-made access logs: it catches a planted
duplicate, a planted loss (never answered, or answered and not stored), a planted repeat after a 5xx and
an extra robots.txt, and excuses a repeat only when the struck process itself (by the pid its User-Agent
names) had the request in flight, or completed it less than ``RECENT_S`` before the fault.
"""

from __future__ import annotations

from typing import Any

from pipeline.harness.faults.accounting import RECENT_S, Strike, account, pid_of

TRUTH = {"pages": ["http://a.test/1", "http://a.test/2", "http://a.test/3"],
         "server_errors": ["http://a.test/error/0"]}  # fmt: skip
STORED = {"http://a.test/1", "http://a.test/2", "http://a.test/3"}
DEAD, OTHER, NEW = 101, 202, 303  # the struck process, a live one, the struck one's replacement
KILL = Strike("worker", "SIGKILL", fault_t=10.0, back_t=11.0, pids=frozenset({DEAD}))


def entry(t: float, path: str, pid: int, *, status: int = 200, end: float | None = None) -> dict[str, Any]:
    return {"t": t, "end": t if end is None else end, "host": "a.test", "path": path, "status": status,
            "ua": f"crawlfleet/0.1 (+x) pid/{pid}"}  # fmt: skip


BASE = [entry(1.0, "/robots.txt", OTHER), entry(1.2, "/2", OTHER), entry(1.3, "/3", OTHER)]  # /1 is the tests'
CLEAN = [*BASE, entry(1.1, "/1", OTHER)]


def judge(log: list[dict[str, Any]], strike: Strike | None = KILL, stored: set[str] = STORED) -> Any:
    return account(truth=TRUTH, log=log, stored_urls=stored, strike=strike, retries=2)


def test_a_clean_crawl_is_ok() -> None:
    acc = judge(CLEAN, None)
    assert acc.ok and (acc.repeats, acc.lost, acc.robots_extra) == (0, 0, 0)


def test_a_planted_duplicate_is_caught() -> None:
    acc = judge([*CLEAN, entry(20.0, "/2", OTHER)], None)
    assert not acc.ok and (acc.repeats, acc.repeats_unexcused) == (1, 1) and acc.repeated_sample == ["a.test/2"]


def test_a_planted_loss_is_caught_both_ways() -> None:
    never_answered = judge([e for e in CLEAN if e["path"] != "/3"], None)
    assert (never_answered.lost, never_answered.lost_unanswered) == (1, 1) and not never_answered.ok
    not_stored = judge(CLEAN, None, stored=STORED - {"http://a.test/2"})
    assert (not_stored.lost, not_stored.lost_unstored) == (1, 1) and not_stored.lost_sample == ["http://a.test/2"]
    gone = judge([*[e for e in CLEAN if e["path"] != "/3"], entry(2.0, "/3", OTHER, status=499)], None)
    assert gone.lost_unanswered == 1  # the client left before the reply: not answered


def test_a_planted_repeat_after_a_5xx_is_caught() -> None:
    retried = [entry(2.0 + i, "/error/0", OTHER, status=500) for i in range(3)]  # 1 + retries: the fetcher's own
    assert judge([*CLEAN, *retried], None).ok
    acc = judge([*CLEAN, *retried, entry(20.0, "/error/0", OTHER, status=500)], None)
    assert (acc.repeats, acc.repeats_unexcused) == (1, 1) and not acc.ok
    after_500 = judge([*BASE, entry(2.0, "/1", OTHER, status=500), entry(3.0, "/1", OTHER)], None)
    assert after_500.repeats_unexcused == 1  # a page that answered 500 once is no always-500 URL


def test_an_extra_robots_txt_is_counted() -> None:
    acc = judge([*CLEAN, entry(20.0, "/robots.txt", NEW)], None)
    assert (acc.robots_requests, acc.robots_extra, acc.robots_sample) == (2, 1, ["a.test"])


def test_a_robots_txt_in_flight_on_the_killed_process_may_be_asked_again_an_old_one_not() -> None:
    log = [entry(1.1, "/1", OTHER), entry(1.2, "/2", OTHER), entry(1.3, "/3", OTHER)]
    flight = judge([*log, entry(9.99, "/robots.txt", DEAD, end=10.01), entry(11.5, "/robots.txt", NEW)])
    assert (flight.robots_extra, flight.robots_in_flight, flight.robots_sample) == (0, 1, [])
    old = judge([*log, entry(5.0, "/robots.txt", DEAD), entry(11.5, "/robots.txt", NEW)])
    assert (old.robots_extra, old.robots_in_flight, old.robots_sample) == (1, 0, ["a.test"])
    # A failure names who asked when, from the fault, as the server logged it.
    assert old.robots_detail == {"a.test": ["101 struck -5.000..-5.000 200", "303 +1.500..+1.500 200"]}


def test_a_request_in_flight_on_the_killed_process_may_be_asked_again() -> None:
    log = [*BASE, entry(9.0, "/1", DEAD, end=10.5), entry(12.0, "/1", NEW)]  # started 1 s before, not done
    acc = judge(log)
    assert acc.ok and (acc.in_flight_at_fault, acc.in_flight_repeats) == (1, 1)
    late = judge([*BASE, entry(10.05, "/1", DEAD), entry(12.0, "/1", NEW)])  # seen by the server after the kill
    assert late.ok and late.in_flight_repeats == 1


def test_a_zero_length_request_holds_its_millisecond() -> None:
    acc = judge([*BASE, entry(9.9995, "/1", DEAD), entry(12.0, "/1", NEW)])
    assert acc.in_flight_at_fault == 1 and acc.in_flight_repeats == 1


def test_a_recent_request_of_the_killed_process_is_excused_an_old_one_is_not() -> None:
    recent = judge([*BASE, entry(10.0 - RECENT_S / 2, "/1", DEAD), entry(12.0, "/1", NEW)])
    assert recent.ok and (recent.recent_at_fault, recent.recent_repeats, recent.in_flight_repeats) == (1, 1, 0)
    old = judge([*BASE, entry(10.0 - 5, "/1", DEAD), entry(12.0, "/1", NEW)])  # done 5 s before the kill
    assert not old.ok and old.repeats_unexcused == 1 and old.repeated_sample == ["a.test/1"]


def test_a_slow_page_completed_in_the_last_second_is_recent_by_its_end() -> None:
    slow = judge([*BASE, entry(10.0 - 1.6, "/1", DEAD, end=10.0 - 0.1), entry(12.0, "/1", NEW)])  # 1.5 s reply
    assert slow.ok and (slow.recent_at_fault, slow.recent_repeats) == (1, 1)
    old = judge([*BASE, entry(10.0 - 3.0, "/1", DEAD, end=10.0 - 1.5), entry(12.0, "/1", NEW)])
    assert not old.ok and old.repeats_unexcused == 1


def test_only_the_struck_process_own_requests_are_excused() -> None:
    acc = judge([*BASE, entry(9.9, "/1", OTHER, end=10.5), entry(12.0, "/1", NEW)])  # a live process had it
    assert acc.repeats_unexcused == 1 and acc.in_flight_at_fault == 0
    twice_before = judge([*BASE, entry(9.9, "/1", DEAD), entry(9.95, "/1", OTHER)])  # both before the fault
    assert twice_before.repeats_unexcused == 1


def test_a_process_that_fetches_nothing_excuses_nothing() -> None:
    strike = Strike("dispatcher", "SIGKILL", fault_t=10.0, back_t=11.0)
    acc = judge([*BASE, entry(9.9, "/1", DEAD, end=10.5), entry(12.0, "/1", NEW)], strike)
    assert acc.repeats_unexcused == 1 and acc.in_flight_at_fault == 0 and acc.process == "dispatcher"


def test_a_stopped_process_fetches_nothing_stale_once_woken() -> None:
    stop = Strike("worker", "SIGSTOP", fault_t=10.0, back_t=12.0, pids=frozenset({DEAD}))
    reissued = judge([*BASE, entry(9.8, "/1", DEAD), entry(11.0, "/1", OTHER)], stop)
    assert reissued.ok and reissued.recent_repeats == 1  # its recent work re-issued elsewhere while it slept
    stale = judge([*BASE, entry(11.0, "/1", OTHER, end=11.0), entry(12.5, "/1", DEAD)], stop)
    assert not stale.ok and stale.woken_repeats == 1  # woken, it fetched a URL already fetched


def test_the_pid_comes_from_the_user_agent_suffix() -> None:
    assert pid_of("crawlfleet/0.1 (+https://x; ops@x) pid/4242") == 4242
    assert pid_of("crawlfleet/0.1 (+https://x; ops@x)") is None and pid_of("") is None


def test_a_retry_sequence_of_a_500_cut_by_the_kill_was_one_fetch_in_flight() -> None:
    """The killed process had asked an always-500 URL twice of 1 + retries (backing off, 1.5 s before
    the kill): its fetch was not over, so the replacement's three asks repeat a fetch in flight."""
    log = [*CLEAN, entry(8.5, "/error/0", DEAD, status=500), entry(9.2, "/error/0", DEAD, status=500),
           *[entry(12.0 + i, "/error/0", NEW, status=500) for i in range(3)]]  # fmt: skip
    acc = judge(log)
    assert acc.ok and (acc.repeats, acc.in_flight_repeats) == (2, 2)
    done = [*CLEAN, *[entry(5.0 + i / 10, "/error/0", DEAD, status=500) for i in range(3)],
            entry(12.0, "/error/0", NEW, status=500)]  # its three asks were over long before: a repeat
    assert judge(done).repeats_unexcused == 1


def test_a_retry_sequence_of_a_500_over_in_the_last_second_counts_as_recent_whole() -> None:
    """Three asks 1.5 s apart in all, the last 0.3 s before the kill: one fetch, reported after its last
    ask, so all three may be asked again; had the last been 2 s before the kill, none may."""
    recent = [*CLEAN, *[entry(8.2 + i * 0.75, "/error/0", DEAD, status=500) for i in range(3)],
              *[entry(12.0 + i, "/error/0", NEW, status=500) for i in range(3)]]  # fmt: skip
    acc = judge(recent)
    assert acc.ok and acc.repeats == 3 and acc.in_flight_repeats == 3
    old = [*CLEAN, *[entry(6.5 + i * 0.75, "/error/0", DEAD, status=500) for i in range(3)],
           *[entry(12.0 + i, "/error/0", NEW, status=500) for i in range(3)]]  # fmt: skip
    assert judge(old).repeats_unexcused == 3

