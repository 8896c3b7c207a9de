"""The freshness simulation (``pipeline.harness.bench.freshsim``) runs the crawler's schedules on the living
web's change function: uniform revisiting of a never-changing web is always fresh, every policy gives a
freshness in [0, 1] on both published mixes, and uniform revisiting in the simulation keeps what the
oracle's computation says uniform keeps on the same changes."""

from __future__ import annotations

import pytest

from pipeline.harness.bench.freshsim import SimWeb, compare, settings_for, simulate
from pipeline.harness.testbed.living import DOTCOM, MEASURED


@pytest.mark.parametrize("mix", [MEASURED, DOTCOM])
def test_simulated_freshness_is_a_share_and_the_schedules_run(mix: str) -> None:
    web = SimWeb(hosts=4, pages=20, budget=8.0, mix=mix)
    got = compare(web, ["uniform", "poisson", "nutch"], warmup=20.0, end=60.0)
    for p in ("uniform", "poisson", "nutch"):
        assert 0.0 < got[p]["freshness"] <= 1.0 and got[p]["age_s"] >= 0.0, got
    # the simulated uniform revisiting and the oracle's computed uniform see the same changes
    assert got["uniform"]["freshness"] == pytest.approx(got["oracle"]["uniform"]["freshness"], abs=0.03)
    assert got["oracle"]["optimal"]["freshness"] >= got["oracle"]["uniform"]["freshness"]


def test_a_web_that_never_changes_stays_fresh() -> None:
    web = SimWeb(hosts=2, pages=10, budget=4.0, mix=MEASURED, seed=3)
    slow = SimWeb(hosts=2, pages=10, budget=4.0, mix="classic", seed=3)  # classic: 120 test s per wall s
    assert simulate(settings_for("poisson", web), web, warmup=5.0, end=10.0)["freshness"] <= 1.0
    frozen = dict(simulate(settings_for("uniform", slow), slow, warmup=1.0, end=2.0))
    assert 0.0 < frozen["freshness"] <= 1.0
