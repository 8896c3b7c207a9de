"""bench fleet's idle stats, computed from a dispatcher's events (#18 point 4), and its link rounds, read
from the link service's log."""

from __future__ import annotations

from typing import Any

from pipeline.harness.bench.fleetstats import _idle_stats, link_rounds
from pipeline.transport.links.service import ROUND_LINE


def _issue(t: float, serial: int, node: str, n: int) -> dict[str, Any]:
    return {"t": t, "ev": "issue", "serial": serial, "node": node, "n": n}


def _done(t: float, serial: int, elapsed: float) -> dict[str, Any]:
    return {"t": t, "ev": "done", "serial": serial, "elapsed_s": elapsed, "pages": 1}


def test_idle_shares_round_trips_and_counters() -> None:
    # 0-2 s: one batch out; 2-6 s: none (a link round); 6-10 s: two out.
    events = [_issue(0.0, 1, "a", 10), _done(2.0, 1, 1.5), _issue(6.0, 2, "a", 30), _issue(6.0, 3, "b", 50),
              _done(10.0, 2, 3.0), _done(10.0, 3, 2.0), {"t": 7.0, "ev": "links"}]  # fmt: skip
    out = _idle_stats(events, {"loop_turns": 100, "dispatch_rounds": 20, "empty_rounds": 5}, 10.0)
    assert out["share_no_batch_out"] == 0.4
    assert out["share_under_8_batches_out"] == 1.0
    assert out["round_trip_s"]["p50"] == 4.0
    assert out["round_trip_minus_node_fetch_s"]["p50"] == 1.0  # 0.5, 1.0, 2.0
    assert out["batch_size"] == {"p10": 10, "p50": 30, "p90": 50, "mean": 30.0}
    assert out["batches_per_node"] == {"a": 2, "b": 1}
    assert out["loop_turns_per_s"] == 10.0 and out["dispatch_rounds_per_s"] == 2.0
    assert out["empty_round_share"] == 0.25


def test_no_events_no_stats() -> None:
    assert _idle_stats([], {}, 10.0) == {}
    assert _idle_stats([_issue(0.0, 1, "a", 1)], {}, 0.0) == {}


def test_what_the_web_server_saw_pages_requests_and_repeats() -> None:
    from pipeline.harness.bench.fleetstats import served

    log = [{"host": "a", "path": "/robots.txt"}, {"host": "a", "path": "/"}, {"host": "a", "path": "/p/1"},
           {"host": "b", "path": "/"}, {"host": "a", "path": "/p/1"}]  # fmt: skip
    assert served(log) == {"pages": 3, "requests": 4, "repeats": 1}


def test_link_rounds_are_read_from_the_services_round_lines() -> None:
    # extract CPU 0.2 s a round + 1 ms a result; merge 0.05 s + 0.5 ms
    rows = [(4, 2.0, 1.5, 0.25, 100), (10, 6.0, 3.0, 2.0, 1000), (2, 1.0, 0.5, 0.125, 40)]
    lines = [ROUND_LINE % (i, segs, 900, 40, 3, total, ext, merge, n, 0.2 + n / 1000, 0.05 + n / 2000)
             for i, (segs, total, ext, merge, n) in enumerate(rows, start=1)]  # fmt: skip
    text = "\n".join(["INFO something else", *(f"2026-11-29 12:00:00 INFO {line}" for line in lines)])
    out = link_rounds(text)
    assert out is not None and out["count"] == 3
    assert out["segments"] == {"p50": 4.0, "p95": 10.0, "max": 10.0}
    assert out["seconds"]["p50"] == 2.0 and out["extract_s"]["p50"] == 1.5 and out["merge_s"]["max"] == 2.0
    cpu = out["cpu"]
    assert cpu["rounds"] == 3 and cpu["results"] == 1140
    assert cpu["extract"]["fixed_s_per_round"] == 0.2 and cpu["extract"]["marginal_ms_per_result"] == 1.0
    assert cpu["merge"]["fixed_s_per_round"] == 0.05 and cpu["merge"]["marginal_ms_per_result"] == 0.5
    assert cpu["extract"]["cpu_s"] == 1.74 and cpu["extract"]["ms_per_result"] == round(1740 / 1140, 4)
    old = "links round 1: 4 segments, 900 candidates, 40 new pending on 3 hosts in 2.00s (extract 1.50s, merge 0.25s)"
    assert link_rounds(old) is not None and "cpu" not in link_rounds(old)  # type: ignore[operator]  # logs before CPU
    assert link_rounds("no rounds here") is None
