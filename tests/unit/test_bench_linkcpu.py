"""The link path's CPU split in ``crawlfleet bench fleet`` (pipeline/harness/bench/linkcpu.py): the children's
side is the service tree's CPU less the service process's own, per page, and against the bare functions."""

from __future__ import annotations

import math

from pipeline.harness.bench.linkcpu import split


def test_the_childrens_side_is_the_tree_less_the_service_and_is_set_against_the_bare_functions() -> None:
    got = split(30.0, 10.0, 50_000, 0.2)
    assert got["links_children_cpu_ms_per_page"] == 0.4 and got["links_service_cpu_ms_per_page"] == 0.2
    assert got["links_children_x_bare"] == 2.0


def test_no_samples_or_no_pages_give_no_figure_rather_than_a_wrong_one() -> None:
    for args in ((None, 1.0, 10, 0.2), (math.nan, 1.0, 10, 0.2), (3.0, math.nan, 10, 0.2), (3.0, 1.0, 0, 0.2)):
        assert set(split(*args).values()) == {None}
    assert split(3.0, 1.0, 10, None)["links_children_x_bare"] is None
