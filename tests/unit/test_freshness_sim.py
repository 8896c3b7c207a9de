"""The freshness simulation (``pipeline.harness.bench.freshsim``) runs the crawler's schedules on the living
web's change function: uniform revisiting of a never-changing web is always fresh, and every policy gives a
freshness in [0, 1] on the measured mix."""

from __future__ import annotations

from pipeline.harness.bench.freshsim import simulate
from pipeline.harness.testbed.living import MEASURED, Living


def test_simulated_freshness_is_a_share_and_the_schedules_run() -> None:
    living = Living(0.0, 30_000.0, mix=MEASURED)
    got = {p: simulate(p, living, warmup=30.0, end=45.0) for p in ("uniform", "poisson", "nutch")}
    assert all(0.0 < v <= 1.0 for v in got.values()), got
    slow = Living(0.0, 1e-6, mix=MEASURED)  # nothing changes in 45 s: every copy stays fresh
    assert simulate("poisson", slow, warmup=30.0, end=45.0) == 1.0
