"""S3's n_i in a real fleet on real RabbitMQ: three Celery fetch nodes, each reaching the testbed through
its own byte-limited path at 1x, 2x, 4x (bench s3's ``--means bandwidth``), the real dispatcher sizing
their batches from the times they really took (``dispatch.history_halflife``'s estimator).

Judged on sizes, not on times: once the warm-up rule says every node's size settled, the batches are
ordered by the nodes' bandwidth and the 4x node's is at least 2.5x the 1x node's (with equal batches,
or sizes that ignore the measured times, this fails). The journal carries n_i as asked (``want``) and
every round, warm-up included.
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
    last = rounds[-1]
    slow, mid, fast = last["n"]  # node order is 1x, 2x, 4x
    assert slow < mid < fast and fast >= 2.5 * slow, rounds
    assert all(r["want"] for r in rounds)  # the dispatcher journals n_i as asked
    by_speed = {v["speed"]: v for v in out["nodes"].values()}
    assert by_speed[4]["bytes_through_path"] > by_speed[1]["bytes_through_path"] > 0  # through their paths
