"""The report's fetcher section per node: virtual fetchers folded into their node, with the node's
last heartbeat (S1: successes, failures, rate, free slots) from the fleet summary."""

from __future__ import annotations

from typing import Any

from pipeline.report.nodes import node_of, nodes_table, series_by_node


def test_virtual_fetchers_fold_into_their_node() -> None:
    fetchers: dict[str, dict[str, Any]] = {
        "a#0": {"results": 10, "batches": 2, "mean_batch": 5.0, "n_i_last": 40, "t_i_last": 0.02},
        "a#1": {"results": 0, "batches": 0, "mean_batch": None, "n_i_last": None, "t_i_last": None},
        "b#0": {"results": 30, "batches": 3, "mean_batch": 10.0, "n_i_last": 80, "t_i_last": 0.01},
    }
    summary = {"fleet": {"node_heartbeats": {"a": {"successes": 9, "failures": 1, "rate": 4.5, "free_slots": 12}}}}
    table = nodes_table(fetchers, summary)
    assert list(table) == ["a", "b"]
    assert table["a"]["fetchers"] == 2 and table["a"]["results"] == 10 and table["a"]["batches"] == 2
    assert table["a"]["mean_batch"] == 5.0 and table["a"]["n_i_mean"] == 40
    assert table["a"]["heartbeat"] == {"successes": 9, "failures": 1, "rate": 4.5, "free_slots": 12}
    assert table["b"]["heartbeat"] is None and table["b"]["mean_batch"] == 10.0


def test_node_of_and_series_by_node() -> None:
    assert node_of("n1#3") == "n1" and node_of("local") == "local" and node_of("#2") == "(unnamed)"
    folded = series_by_node({"a#0": [(1.0, 10.0), (2.0, 20.0)], "a#1": [(1.0, 30.0)], "b#0": [(1.0, 5.0)]})
    assert folded == {"a": [(1.0, 20.0), (2.0, 20.0)], "b": [(1.0, 5.0)]}
