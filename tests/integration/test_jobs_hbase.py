"""The update step against the real HBase crawl db (Thrift) gives what it gives against SQLite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.runner import JobArgs, LinkPipeline
from jobs.runnerconfig import RunnerConfig

pytestmark = pytest.mark.integration


def test_update_crawldb_on_hbase_matches_sqlite(
    jobs_segment: Path, tmp_path: Path, hbase_thrift: tuple[str, int], hbase_prefix: str
) -> None:
    host, port = hbase_thrift
    cfg = RunnerConfig(runner="inline", work_dir=tmp_path / "work")
    outs = {}
    for name, spec in [("sqlite", f"sqlite:{tmp_path / 'crawl.db'}"),
                       ("hbase", f"hbase://{host}:{port}/{hbase_prefix}jobs")]:
        args = JobArgs(store=spec, allowed_domains=("crawl.test",), max_depth=4, batch_size=100)
        outs[name] = LinkPipeline(cfg, args).process(jobs_segment)
    want = sorted(json.dumps(r, sort_keys=True) for r in outs["sqlite"].new_pending)
    got = sorted(json.dumps(r, sort_keys=True) for r in outs["hbase"].new_pending)
    assert got == want and len(got) > 50
    assert outs["hbase"].counters["dedup"]["round_trips"] == outs["sqlite"].counters["dedup"]["round_trips"]
