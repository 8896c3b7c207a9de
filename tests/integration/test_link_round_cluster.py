"""A link round as one job on the dev stack's real cluster managers: on YARN (``--runner hadoop``, its own
HDFS calls through WebHDFS, uber mode) with segments on hdfs://, and on the standalone Spark master with
segments on s3:// both through mrjob's spark runner (a spark-submit per round) and through the kept
application (jobs/sparkapp.py, two rounds on one context). Each gives the crawl db a local pass of the
same pages gives (new URLs and in-link counts)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from jobs import cluster
from jobs.runner import LinkPipeline
from jobs.runnerconfig import RunnerConfig
from jobs.sparkapp import SparkRounds
from jobs.synth import make_results, write_segment
from pipeline.storage.segments import Segments
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.links.rules import RULES_KEY, CrawlLinkRules

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

RULES = CrawlLinkRules(("crawl.test",), 5, 10_000)


def _db(tmp_path: Path, name: str) -> str:
    with SqliteStore(tmp_path / f"{name}.db") as store:
        store.put_meta(RULES_KEY, RULES.to_json())
    return f"sqlite:{tmp_path / f'{name}.db'}"


def _inlinks(spec: str) -> dict[str, int]:
    with SqliteStore(Path(spec.removeprefix("sqlite:"))) as store:
        return {r.url: r.inlinks for h, _ in store.pending_hosts() for r in store.pending(h, 10_000)}


@pytest.mark.parametrize("how", ["yarn", "spark-per-round", "spark-app"])
def test_a_round_on_the_cluster_gives_the_crawl_db_of_a_local_pass(
    how: str, tmp_path: Path, unique: str, hdfs_yarn: str, s3_server: object, spark_standalone: str
) -> None:
    results = list(make_results(60, hosts=3, links=12, page_bytes=2000, seed=11))
    local = tmp_path / "local" / "n0" / "s.jsonl"
    write_segment(local, results)
    ref = _db(tmp_path, "ref")
    LinkPipeline(RunnerConfig(work_dir=tmp_path / "wr"), RULES.job_args(store=ref, batch_size=50, lru_size=100)
                 ).process_many([local], name="ref", round_id="ref")  # fmt: skip
    root = (f"{cluster.namenode_uri()}/tmp/crawlfleet-tests/{unique}" if how == "yarn"
            else f"s3://crawlfleet/tests/{unique}")  # fmt: skip
    segs = Segments(root)
    lines = local.read_bytes().splitlines(keepends=True)
    keys = [segs.close_part(segs.write_part(f"n{i}", "s.jsonl", b"".join(lines[i * 30 : (i + 1) * 30])))
            for i in range(2)]  # fmt: skip
    spec = _db(tmp_path, "svc")
    runner = "hadoop" if how == "yarn" else "spark"
    cfg = RunnerConfig(runner=runner, work_dir=tmp_path / "w", spark_master=cluster.spark_master())
    pipe = LinkPipeline(cfg, RULES.job_args(store=spec, batch_size=50, lru_size=100))
    app = SparkRounds(cfg) if how == "spark-app" else None
    try:
        got = pipe.run_round([segs.uri(k) for k in keys], name="r", round_id="r1",
                             execute=app.run if app else None)  # fmt: skip
        assert sorted(r["url"] for r in got.new_pending) == sorted(_inlinks(ref)) and _inlinks(spec) == _inlinks(ref)
        if app is not None:  # the next round on the same application: nothing new, nothing counted twice
            again = pipe.run_round([segs.uri(k) for k in keys], name="r", round_id="r1", execute=app.run)
            assert again.new_pending == [] and _inlinks(spec) == _inlinks(ref)
    finally:
        if app is not None:
            app.close()
        with contextlib.suppress(FileNotFoundError):
            segs.fs.rm(segs.base, recursive=True)
