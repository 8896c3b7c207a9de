"""``crawlfleet testbed truth --json`` prints the same truth as the library."""

from __future__ import annotations

import json

import pytest

from pipeline.harness.testbed.cli import main
from pipeline.harness.testbed.model import Web
from pipeline.harness.testbed.truth import compute_truth


def test_truth_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["truth", "--hosts", "4", "--pages", "6", "--seed", "3", "--max-depth", "5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == compute_truth(Web(4, 6, seed=3, port=8080), max_depth=5)
    assert got["params"] == {"hosts": 4, "pages": 6, "seed": 3, "port": 8080, "max_depth": 5}
    assert sorted(got) == sorted(
        [
            "seeds",
            "pages",
            "fetch_urls",
            "redirect_hops",
            "server_errors",
            "forbidden",
            "nofollow_only",
            "trap_prefix",
            "robots_txt",
            "params",
        ]
    )
