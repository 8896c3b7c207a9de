"""The example products plugin on the embedded crawl, judged against the testbed's truth: every product
exactly once, with its fields, also when a parse process is killed with SIGKILL mid-crawl and when the
crawl itself is killed and resumed. A plugin that raises costs its pages a recorded error, never the crawl;
a plugin that cannot be loaded is one line at start-up and nothing is created."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.export.items import iter_items
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.products import products_truth
from pipeline.storage.sqlite import SqliteStore
from tests.e2e.test_embedded_crawl import MAX_DEPTH, crawl_cmd, wait_requests
from tests.e2e.test_parse_processes import _parse_child

pytestmark = pytest.mark.e2e

PLUGIN = "crawlfleet.examples.products:Products"


def _run(cmd: list[str], **env: str) -> subprocess.Popen[str]:
    full = dict(os.environ, CRAWLFLEET_FETCH_PARSE_PROCESSES="1", CRAWLFLEET_FETCH_PROCESSES="0", **env)
    return subprocess.Popen(cmd, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _summary(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return dict(json.loads(out.strip().splitlines()[-1]))


def judge_products(tb: TestbedProcess, out: Path) -> list[dict[str, Any]]:
    want = products_truth(tb.web, tb.truth(max_depth=MAX_DEPTH)["pages"])
    got = [i for i in iter_items(out) if i["type"] == "product"]
    twice = [sku for sku, n in collections.Counter(i["item"]["sku"] for i in got).items() if n > 1]
    assert twice == []
    assert sorted((i["url"], i["item"]["sku"], i["item"]["name"], i["item"]["price"], i["item"]["currency"])
                  for i in got) == sorted((w["url"], w["sku"], w["name"], w["price"], w["currency"]) for w in want)
    assert all(i["digest"].startswith("sha1:") and i["fetched_at"] > 0 and i["plugin"] == "products" for i in got)
    return got


def test_every_product_once_with_jsonl_and_parquet(tmp_path: Path) -> None:
    with TestbedProcess(8, 30, seed=41, workdir=tmp_path / "tb", products=True) as tb:
        out = tmp_path / "out"
        summary = _summary(_run(crawl_cmd(tb, out, "--plugin", PLUGIN), CRAWLFLEET_PLUGINS_ITEMS_FORMAT="both",
                                CRAWLFLEET_PLUGINS_ITEMS_FILE_BYTES="4000"))  # fmt: skip
        got = judge_products(tb, out)
    assert summary["items"]["items"] == len(got) and summary["items"]["errors"] == 0
    jsonl, parquet = sorted((out / "items").glob("*.jsonl")), sorted((out / "items").glob("*.parquet"))
    assert len(jsonl) > 2 and [p.stem for p in parquet] == [p.stem for p in jsonl]  # rotated, each converted
    import pyarrow.parquet as pq

    rows = sum(pq.read_table(p).num_rows for p in parquet)
    assert rows == len(got)


def test_fetch_processes_run_the_plugin_with_the_links(tmp_path: Path) -> None:
    """With two fetch processes the children extract links, and the plugins with them (fetchchild.py)."""
    with TestbedProcess(8, 30, seed=45, workdir=tmp_path / "tb", products=True) as tb:
        out = tmp_path / "out"
        cmd = crawl_cmd(tb, out, "--plugin", PLUGIN)
        env = dict(os.environ, CRAWLFLEET_FETCH_PROCESSES="2", CRAWLFLEET_FETCH_PARSE_PROCESSES="0")
        proc = subprocess.Popen(cmd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        summary = _summary(proc)
        judge_products(tb, out)
    assert "parse_processes" not in summary


def test_a_parse_process_killed_mid_crawl_costs_no_product(tmp_path: Path) -> None:
    with TestbedProcess(8, 30, seed=42, workdir=tmp_path / "tb", products=True) as tb:
        out = tmp_path / "out"
        proc = _run(crawl_cmd(tb, out, "--plugin", PLUGIN))
        child = _parse_child(proc)
        wait_requests(tb, 80)
        child.send_signal(signal.SIGKILL)
        _summary(proc)
        judge_products(tb, out)


@pytest.mark.parametrize(("at", "write_behind"), [(60, "0"), (140, "0"), (100, "1")])
def test_the_crawl_killed_and_resumed_gives_every_product_once(tmp_path: Path, at: int, write_behind: str) -> None:
    """Killed after ``at`` requests. Its item files hold items past their last commit (the resume cuts them
    back and the journal's replay writes them again); with write-behind the store's checkpoint lags the
    items' commit, and the replayed pages below the commit keep the items they have."""
    with TestbedProcess(8, 30, seed=43, workdir=tmp_path / "tb", products=True) as tb:
        out = tmp_path / "out"
        proc = _run(crawl_cmd(tb, out, "--plugin", PLUGIN), CRAWLFLEET_STORE_WRITE_BEHIND=write_behind)
        wait_requests(tb, at)
        proc.send_signal(signal.SIGKILL)  # the crawl process; its helpers end with their pipes
        proc.communicate(timeout=30)
        resumed = _run([*crawl_cmd(tb, out)[:4], "--resume", *crawl_cmd(tb, out)[4 + len(tb.seeds):]],
                       CRAWLFLEET_STORE_WRITE_BEHIND=write_behind)
        _summary(resumed)
        judge_products(tb, out)


RAISES = '''
from crawlfleet import Item

class Fragile:
    url_pattern = r"/p/"
    def extract(self, page):
        if page.url.endswith("/p/3"):
            raise KeyError("no price on this page")
        yield Item("page", {"title": page.tree.css_first("title").text()})
'''


def test_a_plugin_that_raises_costs_its_pages_a_recorded_error_and_never_the_crawl(tmp_path: Path) -> None:
    (tmp_path / "fragile.py").write_text(RAISES)
    with TestbedProcess(4, 12, seed=44, workdir=tmp_path / "tb") as tb:
        out = tmp_path / "out"
        summary = _summary(_run(crawl_cmd(tb, out, "--plugin", "fragile:Fragile"), PYTHONPATH=str(tmp_path)))
        pages = tb.truth(max_depth=MAX_DEPTH)["pages"]
    failing = [u for u in pages if u.endswith("/p/3")]
    wanted = [u for u in pages if "/p/" in u and not u.endswith("/p/3")]
    assert failing and summary["items"]["errors"] == len(failing)
    assert sorted(i["url"] for i in iter_items(out)) == sorted(wanted)
    store = SqliteStore(out / "crawl.db")
    try:
        rows = [store.get_url(u) for u in failing]
    finally:
        store.close()
    assert all(r is not None and r.state.name == "DONE" for r in rows)
    assert all(r is not None and r.error == "plugin_failed: Fragile raised KeyError: 'no price on this page'"
               for r in rows)


@pytest.mark.parametrize(
    ("spec", "says"),
    [("nosuch.module:Thing", "plugin 'nosuch.module:Thing': cannot import nosuch.module (ModuleNotFoundError"),
     ("nosuchentry", "no entry point 'nosuchentry' in group crawlfleet.plugins")],
)
def test_a_plugin_that_cannot_be_loaded_is_one_line_and_nothing_is_created(tmp_path: Path, spec: str, says: str) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "crawl", "http://site0.crawl.test/", "--out", str(out),
                           "--plugin", spec], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and says in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
