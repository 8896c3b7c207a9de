"""`crawlfleet bench peers` on a tiny web, over http and https: every crawler (crawlfleet, colly in both
settings, Scrapy, the bare loop) is built or installed, runs, and reaches every page of the truth, judged
from the testbed's access log. A tool that cannot be built or installed fails this test (no skip)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pipeline.harness.bench.peers import bench, runners

pytestmark = pytest.mark.integration


def test_every_peer_crawls_a_tiny_web_over_http_and_https(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(["--hosts", "4", "--pages", "8", "--repeats", "1", "--scheme", "both",
                              "--per-host", "2", "--out", str(tmp_path)])  # fmt: skip
    result = bench.run(args)
    for scheme in ("http", "https"):
        part = result[scheme]
        assert part["truth_pages"] > 20
        for name in runners.PEERS:
            (fig,) = part["runs"][name]
            assert fig["exit"] == 0, (scheme, name, fig.get("stderr"))
            assert fig["coverage"] >= 0.95, (scheme, name, fig)  # the others may miss a page or two (Scrapy did one)
            assert fig["cpu_s"] > 0 and fig["pages_per_s"] > 0, (scheme, name, fig)
        assert part["runs"]["crawlfleet"][0]["coverage"] == 1.0
        assert part["runs"]["bare"][0]["duplicates"] == 0
        assert part["colly_fastest_setting"] in ("colly-perhost", "colly-global")
        assert set(part["ratios"]) >= {"colly_pages_per_s", "colly_cpu_per_page", "scrapy_pages_per_s", "bare_pages_per_s"}
