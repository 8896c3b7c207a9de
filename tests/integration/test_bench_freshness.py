"""``crawlfleet bench freshness`` with the fleet beside uniform revisiting, end to end on a tiny web: a real
fetch node, link jobs and dispatcher on RabbitMQ crawl a living testbed at the same instants as an embedded
uniform crawl, and the bench reports both modes against one oracle. What is checked is that the bench runs
and reports, never its figures (a bench's numbers are for the bench, and this web is far too small for
them): the run exits 0 only when every crawl ran to the end and was stopped by its stop file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]


def test_bench_freshness_runs_the_fleet_beside_uniform(rabbitmq: str) -> None:
    cmd = [sys.executable, "-m", "pipeline.cli", "bench", "freshness", "--json", "--hosts", "4", "--pages", "5",
           "--budget", "10", "--warmup", "6", "--seconds", "8", "--repeats", "1", "--mixes", "measured",
           "--modes", "uniform,fleet"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=540, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert out["modes"] == ["uniform", "fleet"] and out["groups"] == [["uniform", "fleet"]]
    (run,) = out["mixes"]["measured"]["runs"]
    for mode in ("uniform", "fleet"):
        figures = run[mode]
        wanted = {"mean_freshness", "mean_age_s", "requests_per_s", "conditional", "wire", "recrawl"}
        assert wanted <= set(figures), sorted(figures)
        assert figures["oracle"] == run["groups"][0]["oracle"]  # one web, one epoch, one oracle
    assert {"gain_share", "age_gain_share", "freshness_to_uniform"} <= set(run["ratios"]["fleet"])
    assert set(out["mixes"]["measured"]["summary"]) == {"uniform", "fleet"}
