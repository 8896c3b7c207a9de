"""``crawlfleet bench dispatch``'s harness drives the real fleet dispatcher without a broker, and its
one-core arithmetic. No timed assertions: only what ran, and the formula on given figures."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pipeline.harness.bench.decisions import measure
from pipeline.harness.bench.dispatch import one_core


def test_the_harness_runs_the_dispatchers_own_turns(tmp_path: Path) -> None:
    got = measure(3, seconds=0.1, slots=4, out=tmp_path, memory=True)
    assert got["virtual_fetchers"] == 12 and got["rounds"] >= 12 and got["heartbeats_timed"] >= 3
    assert got["batches_issued"] > 12 and got["batches_published"] == got["batches_issued"]
    assert 1 <= got["pages_per_batch"] <= 64 and got["state_bytes_per_node"] > 0
    for name in ("decision_us", "completion_us_per_page", "heartbeat_us", "tick_us"):
        assert got[name] == got[name], name  # measured (not NaN)
    assert (tmp_path / "fleet-events.jsonl").read_text().count('"ev": "issue"') == got["batches_issued"]


def _figures(decision_us: float) -> dict[str, float]:
    return {"decision_us": decision_us, "heartbeat_us": 0.0, "tick_us": 0.0}


def test_one_core_is_the_fleet_crawls_cost_plus_what_grows_with_the_nodes() -> None:
    args = argparse.Namespace(node_pages_per_s=100.0, fleet_ms_per_page=0.1, fleet_ms_per_s=0.0, batch_pages=10.0)
    flat = {f"nodes_{n}": {"median": _figures(50.0)} for n in (2, 100, 1000)}
    assert one_core(flat, args)["nodes"] == 100  # 100 nodes x 100 pages/s x 0.1 ms = 1 s per s
    # decisions growing by 1 us per node: at N nodes N*100/10 decisions/s cost N*(N-2) us more each
    grow = {f"nodes_{n}": {"median": _figures(50.0 + (n - 2))} for n in (2, 100, 1000)}
    got = one_core(grow, args)
    n = got["nodes"]
    assert n * 100 * 1e-4 + n * 10 * (n - 2) * 1e-6 <= 1.0 < (n + 1) * 100 * 1e-4 + (n + 1) * 10 * (n - 1) * 1e-6
    assert got["cores_needed"]["1000"] == pytest.approx(10 + 1000 * 10 * 998e-6, abs=0.01)
