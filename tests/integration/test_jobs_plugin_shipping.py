"""The plugins' code ships with the extract job: on mrjob's local, Spark and Hadoop runners every task is a
process of its own (a Python worker, a streaming task) that does not share the driver's import path, so a plugin importable only in the driver (a directory
put on its ``sys.path`` at run time, as a program that embeds the crawl may do) reaches the tasks only in
the ``--py-files`` zip (pipeline/plugins/shipping.py). Without the zip the same job fails. On the dev stack's
real cluster managers too: a job submitted to YARN with the segment and the items on hdfs://, and one on the
standalone Spark master with both on s3://."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fetchers.records import FetchResult
from jobs import cluster
from jobs.itemargs import ItemArgs
from jobs.runner import JobArgs, extract_links
from jobs.runnerconfig import RunnerConfig
from pipeline.storage.itemfiles import filesystem, read_items
from pipeline.storage.journal import journal_line
from pipeline.storage.segments import Segments
from pipeline.urls import fingerprint

pytestmark = pytest.mark.integration

PLUGIN = '''
from crawlfleet import Item, Link

class Heads:
    def extract(self, page):
        yield Item("heading", {"h1": page.tree.css_first("h1").text(), "pkg": __name__})
        yield Link("/shipped")
'''


@pytest.fixture
def only_in_the_driver(tmp_path: Path) -> Iterator[str]:
    pkg = tmp_path / "driveronly" / "shipplug"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(PLUGIN)
    sys.path.insert(0, str(pkg.parent))
    yield "shipplug:Heads"
    sys.path.remove(str(pkg.parent))
    sys.modules.pop("shipplug", None)


def _page() -> bytes:
    url = "http://site.test/"
    res = FetchResult(url, fingerprint(url), 0, final_url=url, status=200, content_type="text/html",
                      body=b"<html><h1>Hello</h1><a href='/a'>a</a></html>", fetched_at=5.0)  # fmt: skip
    return journal_line(res)


def _segment(tmp_path: Path) -> Path:
    seg = tmp_path / "node-segments" / "n1" / "default-000000001-1.jsonl"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(_page())
    return seg


@pytest.mark.timeout(600)
@pytest.mark.parametrize("runner", ["local", "spark", "hadoop"])
def test_a_plugin_only_the_driver_can_import_runs_in_the_runners_tasks(
    tmp_path: Path, only_in_the_driver: str, runner: str, request: pytest.FixtureRequest
) -> None:
    if runner != "local":
        request.getfixturevalue(f"{runner}_ready")
    seg = _segment(tmp_path)
    items = ItemArgs(plugins=(only_in_the_driver,), root=str(tmp_path / "items"))
    cfg = RunnerConfig(runner=runner, work_dir=tmp_path / "work", map_tasks=1)
    out = extract_links([seg], JobArgs(store="", max_depth=3, items=items).extract(), cfg)
    assert sorted(r["url"] for r in out.records) == ["http://site.test/a", "http://site.test/shipped"]
    got = list(read_items(str(tmp_path / "items")))
    assert [(i["type"], i["item"]) for i in got] == [("heading", {"h1": "Hello", "pkg": "shipplug"})]
    assert (tmp_path / "items" / "n1" / "default-000000001-1.jsonl").exists()
    assert out.counters["items"]["items"] == 1


@pytest.mark.timeout(900)
@pytest.mark.parametrize("how", ["yarn", "spark-standalone"])
def test_the_plugin_ships_to_tasks_on_the_real_cluster_managers(
    tmp_path: Path, only_in_the_driver: str, how: str, unique: str, hdfs_yarn: str, s3_server: object,
    spark_standalone: str,
) -> None:  # fmt: skip
    root = (f"{cluster.namenode_uri()}/tmp/crawlfleet-tests/{unique}" if how == "yarn"
            else f"s3://crawlfleet/tests/{unique}")  # fmt: skip
    segs = Segments(f"{root}/segments")
    key = segs.close_part(segs.write_part("n1", "default-000000001-1.jsonl", _page()))
    items = ItemArgs(plugins=(only_in_the_driver,), root=f"{root}/items")
    cfg = RunnerConfig(runner="hadoop" if how == "yarn" else "spark", work_dir=tmp_path / "work", map_tasks=1,
                       spark_master=cluster.spark_master())  # fmt: skip
    try:
        out = extract_links([segs.uri(key)], JobArgs(store="", max_depth=3, items=items).extract(), cfg)
        assert sorted(r["url"] for r in out.records) == ["http://site.test/a", "http://site.test/shipped"]
        got = list(read_items(f"{root}/items"))
        assert [(i["type"], i["item"]) for i in got] == [("heading", {"h1": "Hello", "pkg": "shipplug"})]
        assert out.counters["items"]["items"] == 1
    finally:
        fs, path = filesystem(root)
        with contextlib.suppress(FileNotFoundError):
            fs.rm(path, recursive=True)


def test_without_the_zip_the_tasks_cannot_import_it(tmp_path: Path, only_in_the_driver: str) -> None:
    seg = _segment(tmp_path)
    args = JobArgs(store="", max_depth=3, items=ItemArgs(plugins=(only_in_the_driver,), root=str(tmp_path / "i")))
    argv = args.extract()
    at = argv.index("--py-files")
    del argv[at : at + 2]
    cfg = RunnerConfig(runner="local", work_dir=tmp_path / "work", map_tasks=1)
    with pytest.raises(Exception) as err:  # noqa: PT011 - mrjob's StepFailedException, whatever its module
        extract_links([seg], argv, cfg)
    assert "Step" in type(err.value).__name__ or "fail" in str(err.value).lower(), json.dumps(str(err.value))
