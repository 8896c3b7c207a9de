"""The EMR example config is documented, not run: it must parse into known EMR options, and the link
service's two jobs must build EMR runners from it with the crawl's rules and store (offline)."""

from __future__ import annotations

from pathlib import Path

from mrjob.conf import load_opts_from_mrjob_conf
from mrjob.emr import EMRJobRunner

from jobs.mr_extract_links import MRExtractLinks
from jobs.mr_update_crawldb import MRUpdateCrawlDb
from jobs.runnerconfig import RunnerConfig
from pipeline.transport.links.rules import CrawlLinkRules

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "mrjob.emr.conf.example"


def test_emr_example_parses_into_known_options() -> None:
    [(_, opts)] = load_opts_from_mrjob_conf("emr", str(EXAMPLE))
    assert set(opts) <= EMRJobRunner.OPT_NAMES
    assert opts["python_bin"] == "python3.11"
    assert any("crawlfleet" in step for step in opts["bootstrap"])


def test_link_service_jobs_build_emr_runners_from_the_example(tmp_path: Path) -> None:
    # What `crawlfleet links --runner emr --conf-path EXAMPLE` hands each round's jobs.
    cfg = RunnerConfig(runner="emr", work_dir=tmp_path, conf_path=str(EXAMPLE))
    rules = CrawlLinkRules(("crawl.test",), 5, 1000, deny=("/private/",))
    args = rules.job_args(store="hbase://10.0.0.5:9090/cf", batch_size=500, lru_size=1000)
    segment = tmp_path / "node-a" / "default-1-1.jsonl"
    for job_cls, job_args, want in ((MRExtractLinks, args.extract(), ["--allowed-domain", "crawl.test"]),
                                    (MRUpdateCrawlDb, args.update(), ["--store", "hbase://10.0.0.5:9090/cf"])):
        job = job_cls(args=[*cfg.args(), *job_args, str(segment)])
        runner = job.make_runner()  # builds its options only: no AWS call until run()
        try:
            assert isinstance(runner, EMRJobRunner)
            assert runner._opts["release_label"] == "emr-7.2.0" and runner._opts["python_bin"] == ["python3.11"]
            assert runner._input_paths == [str(segment)]
            extra = runner._extra_args
            assert all(a in extra for a in want)
        finally:
            runner.cleanup()
