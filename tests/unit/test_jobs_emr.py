"""The EMR example config is documented, not run; it must at least parse into known EMR options."""

from __future__ import annotations

from pathlib import Path

from mrjob.conf import load_opts_from_mrjob_conf
from mrjob.emr import EMRJobRunner

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "mrjob.emr.conf.example"


def test_emr_example_parses_into_known_options() -> None:
    [(_, opts)] = load_opts_from_mrjob_conf("emr", str(EXAMPLE))
    assert set(opts) <= EMRJobRunner.OPT_NAMES
    assert opts["python_bin"] == "python3.11"
    assert any("crawlfleet" in step for step in opts["bootstrap"])
