"""S3's n_i in a real fleet on real RabbitMQ: three Celery fetch nodes, each reaching the testbed through
its own byte-limited path at 1x, 2x, 4x (bench s3's ``--means bandwidth``), the real dispatcher sizing
their batches from the times they really took (``dispatch.history_halflife``'s estimator).

Judged on what the crawl must do, not on a measurement: the warm-up rule says every node's size
settled, n(0) = k, the journal carries n_i as asked (``want``) and every round, warm-up included, and
every node's traffic went through its own path. How the measured sizes order by the nodes' bandwidth
is a figure of ``crawlfleet bench s3`` (``sizes_ordered_by_speed``, ``fastest_over_slowest``): on a
loaded machine one node's measured speed is not its path's. The rule itself (sizes from 1x/2x/4x
per-page times) is checked on controlled inputs in tests/unit/test_s3_sizing_rule.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pipeline.harness.bench.s3 import _crawl
from pipeline.harness.faults.bed import Bed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_real_fleet_sizes_batches_by_each_nodes_bandwidth(rabbitmq: str, tmp_path: Path) -> None:
    args = argparse.Namespace(
        k=16, delay_s=0.0, rounds=3, warmup_rounds=None, settle_min_batches=3, settle_span=3,
        settle_tolerance=0.15, max_warmup_rounds=20, timeout_s=300.0, means="bandwidth", kbps=150.0,
        cpu_pct=6.0, sockets=1,
    )  # fmt: skip
    bed = Bed.start(40, 60, seed=33, workdir=tmp_path / "tb")
    try:
        out = _crawl(bed, rabbitmq, tmp_path / "ni", args, equal=False)
    finally:
        bed.close()
    rounds = out["all_rounds"]
    print(out["warmup_reason"], *rounds, sep="\n")  # shown when it fails
    assert out["settled"], out["warmup_reason"]
    assert len(rounds) == out["warmup_rounds"] + out["rounds"] and out["rounds"] >= args.rounds
    assert all(not r["counted"] and r["why_not_counted"] for r in rounds[: out["warmup_rounds"]])
    assert rounds[0]["want"] == [args.k] * 3  # n(0) = k (the frontier may cut the first batches)
    assert all(r["want"] for r in rounds)  # the dispatcher journals n_i as asked
    assert len(out["last_round_sizes_by_speed"]) == 3 and "sizes_ordered_by_speed" in out  # bench s3's figure
    assert all(v["bytes_through_path"] > 0 for v in out["nodes"].values())  # each node through its own path
