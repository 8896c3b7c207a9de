"""The example products plugin on the fleet: it runs inside the mrjob extract job of ``crawlfleet links``,
and its items land under the crawl's item root, one file per segment. Judged against the testbed's truth:
every product exactly once, on SQLite and on the real HBase, also when a fetch node is killed with
SIGKILL mid-crawl and comes back (it adopts the segment it was writing, whose pages are fetched again
elsewhere: those copies must give no second item set)."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from pipeline.export.items import iter_items
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.products import products_truth
from tests.e2e.test_embedded_crawl import wait_requests
from tests.fixtures.rabbitmq import MAX_DEPTH, check_truth
from tests.integration.test_fleet_link_jobs import stop

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PLUGIN = "crawlfleet.examples.products:Products"


def judge_products(tb: TestbedProcess, items_root: Path) -> list[dict[str, Any]]:
    """Every product of the truth exactly once, with its fields, from the page it is on."""
    want = products_truth(tb.web, tb.truth(max_depth=MAX_DEPTH)["pages"])
    got = [i for i in iter_items(items_root) if i["type"] == "product"]
    twice = [sku for sku, n in collections.Counter(i["item"]["sku"] for i in got).items() if n > 1]
    assert twice == []
    assert sorted((i["url"], i["item"]["sku"], i["item"]["name"], i["item"]["price"], i["item"]["currency"])
                  for i in got) == sorted((w["url"], w["sku"], w["name"], w["price"], w["currency"]) for w in want)
    assert all(i["digest"].startswith("sha1:") and i["fetched_at"] > 0 for i in got)
    return got


@pytest.mark.parametrize("store", ["sqlite", "hbase"])
def test_the_plugin_runs_in_the_link_jobs_and_gives_every_product_once(
    rabbitmq: str, fleet: Any, tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    env = {"CRAWLFLEET_PLUGINS_ENABLED": PLUGIN}
    if store == "hbase":
        prefix = f"{request.getfixturevalue('hbase_prefix')}pr"
        env |= {"CRAWLFLEET_STORE_KIND": "hbase", "CRAWLFLEET_STORE_HBASE_PREFIX": prefix}
    with TestbedProcess(8, 30, seed=31, workdir=tmp_path / "tb", products=True) as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, extra_env=env)
        f.crawl_to_end(2)
        check_truth(tb, tb.truth(max_depth=MAX_DEPTH), nodes=2)
        got = judge_products(tb, f.out / "items")
    assert got and all(p.suffix == ".jsonl" for p in (f.out / "items").rglob("*.jsonl"))


def test_a_fetch_node_killed_mid_crawl_costs_no_product_and_gives_none_twice(
    rabbitmq: str, fleet: Any, tmp_path: Path
) -> None:
    env = {"CRAWLFLEET_PLUGINS_ENABLED": PLUGIN, "CRAWLFLEET_DISPATCH_LEASE_S": "6"}
    with TestbedProcess(8, 30, seed=32, workdir=tmp_path / "tb", products=True) as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, extra_env=env)
        a = f.start_worker(1)
        f.start_worker(2)
        f.start_dispatcher()
        assert f.links is not None
        wait_requests(tb, 60)
        f.kill_worker(a)  # SIGKILL: its batch may be half written; the URLs go to the other node
        f.start_worker(1)  # the same node again: it adopts what its last life left
        try:
            f.wait_dispatcher(timeout_s=300)
        finally:
            assert stop(f.links) == 0, f.log_tail("links.log")
        judge_products(tb, f.out / "items")
