"""bench s3's rounds and warm-up from an event journal (pipeline/harness/bench/s3rounds.py): every
round is reported, the warm-up ends when every node's batch size settled (the same rule for n_i and
equal batches), and a warm-up round says why it did not count."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.harness.bench.s3rounds import WarmupRule, finished, judge, node_batches

NODES = ["a", "b", "c"]


def journal(rows: list[tuple[str, int, int, float]]) -> list[dict[str, Any]]:
    """(node, n issued, n_i wanted, elapsed) per batch, each issued at t and reported elapsed + 0.1 later."""
    events: list[dict[str, Any]] = []
    for serial, (node, n, want, elapsed) in enumerate(rows, start=1):
        t = float(serial)
        events.append({"ev": "issue", "t": t, "serial": serial, "node": node, "n": n, "want": want})
        events.append({"ev": "done", "t": t + elapsed + 0.1, "serial": serial, "node": node, "pages": n,
                       "elapsed_s": elapsed})  # fmt: skip
    return events


def rounds_of(sizes: list[tuple[int, int, int]], *, cut: dict[tuple[int, str], int] | None = None,
              times: list[tuple[float, float, float]] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    rows = []
    for r, ns in enumerate(sizes):
        for i, (node, want) in enumerate(zip(NODES, ns, strict=True)):
            n = (cut or {}).get((r, node), want)
            rows.append((node, n, want, times[r][i] if times else 1.0 + 0.01 * i))
    return journal(rows)


RULE = WarmupRule(min_batches=3, span=3, tolerance=0.10, max_rounds=10)


def test_warmup_ends_when_every_node_settled_and_every_round_is_reported() -> None:
    sizes = [(32, 32, 32), (20, 40, 60), (19, 37, 70), (19, 37, 74), (19, 38, 76), (19, 37, 75), (19, 37, 75)]
    j = judge(node_batches(rounds_of(sizes), NODES), NODES, RULE)
    assert len(j.rounds) == 7 and j.warmup == 4 and j.settled  # c: 70, 74, 76 within 10% at round 4
    assert [r.counted for r in j.rounds] == [False] * 4 + [True] * 3
    assert "a: 0 batch(es) behind it" in j.rounds[0].why
    assert j.rounds[3].why == "c: n moving 60->70->74"
    assert "settled: from round 4" in j.reason and "a at 3, b at 3, c at 4" in j.reason
    assert j.median() == pytest.approx(1.02)
    assert j.rounds[5].as_json()["n"] == [19, 37, 75]


def test_a_batch_cut_by_the_frontier_is_warm_up_on_both_sides() -> None:
    equal = [(32, 32, 32)] * 8
    j = judge(node_batches(rounds_of(equal, cut={(3, "b"): 5}), NODES), NODES, RULE)
    assert j.warmup == 6  # rounds 3..5 hold b's cut batch
    assert j.rounds[4].why == "b: frontier cut 5 of 32"
    plain = judge(node_batches(rounds_of(equal), NODES), NODES, RULE)
    assert plain.warmup == 3  # equal batches settle as soon as t_i has its samples


def test_spreads_wall_and_node_times() -> None:
    times = [(1.0, 2.0, 4.0)] * 4
    j = judge(node_batches(rounds_of([(32, 32, 32)] * 4, times=times), NODES), NODES, RULE)
    assert [round(r.spread, 6) for r in j.rounds] == [4.0] * 4
    assert j.rounds[0].spread_wall == pytest.approx(4.1 / 1.1)  # issue to report adds 0.1 s here
    assert j.median(wall=True) == pytest.approx(4.1 / 1.1)


def test_not_settled_within_the_cap_counts_the_rest_flagged() -> None:
    wobble = [(32, 16, 32) if r % 2 else (32, 32, 32) for r in range(14)]
    j = judge(node_batches(rounds_of(wobble), NODES), NODES, RULE)
    assert not j.settled and j.warmup == 10 and "not settled within 10 rounds" in j.reason
    assert len(j.counted) == 4
    assert not finished(j, rounds=5, rule=RULE) and finished(j, rounds=4, rule=RULE)


def test_fixed_warmup_and_finished() -> None:
    j = judge(node_batches(rounds_of([(32, 32, 32)] * 5), NODES), NODES, WarmupRule(fixed=4))
    assert j.warmup == 4 and len(j.counted) == 1 and j.rounds[0].why.startswith("a: 0 batch")
    ok = judge(node_batches(rounds_of([(32, 32, 32)] * 5), NODES), NODES, RULE)
    assert finished(ok, rounds=2, rule=RULE) and not finished(ok, rounds=3, rule=RULE)


def test_batches_without_pages_or_time_and_unknown_nodes_are_left_out() -> None:
    events = journal([("a", 4, 4, 1.0), ("b", 4, 4, 2.0), ("c", 4, 4, 3.0)])
    events.append({"ev": "done", "t": 9.0, "serial": 99, "node": "a", "pages": 0, "elapsed_s": 1.0})
    events.append({"ev": "done", "t": 9.0, "serial": 98, "node": "zz", "pages": 3, "elapsed_s": 1.0})
    got = node_batches(events, NODES)
    assert [len(got[n]) for n in NODES] == [1, 1, 1]
    assert got["a"][0].want == 4 and got["a"][0].wall_s == pytest.approx(1.1)


def test_equal_batches_held_short_by_the_frontier_stay_warm_up() -> None:
    """Steady 4-URL batches where 32 were asked do not end the warm-up (the dev run's equal side)."""
    cut = {(r, "b"): 4 for r in range(6)}
    j = judge(node_batches(rounds_of([(32, 32, 32)] * 12, cut=cut), NODES), NODES, RULE)
    assert j.warmup == 8 and j.rounds[7].why == "b: frontier cut 4 of 32"
