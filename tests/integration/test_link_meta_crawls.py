"""``Link.meta`` reaches the page fetched from that link, on both scales, with the example breadcrumbs
plugin (crawlfleet/examples/breadcrumbs.py): every page yields its links again with ``{"from": its URL,
"hops": its own hops + 1}``, and its item says what ``page.meta`` it read. Crawled over HTTP from the
testbed: the embedded crawl on SQLite (meta through the crawl db row, the frontier, the task, the fetch
result and the parse), and the fleet on the real HBase (meta through the link jobs' merge into HBase, the
dispatcher's refill, the task message to a fetch node, its segment and the extract job). Judged from the
crawl's own stored pages: each page's ``from`` is a page that links to it (or to a redirect ending at it),
its ``hops`` one more than that page's, and only pages no link found (the seeds) have none."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from pipeline.export.items import iter_items
from pipeline.export.pages import iter_pages
from pipeline.harness.testbed.harness import TestbedProcess
from tests.e2e.test_embedded_crawl import crawl_cmd
from tests.e2e.test_products_embedded import _run, _summary
from tests.fixtures.rabbitmq import MAX_DEPTH

pytestmark = pytest.mark.integration

PLUGIN = "crawlfleet.examples.breadcrumbs:Breadcrumbs"


def judge_crumbs(items: list[dict[str, Any]], pages: list[dict[str, Any]], seeds: list[str]) -> int:
    """The crumbs against the crawl's stored pages (see the module docstring); how many had a ``from``."""
    crumbs = [i for i in items if i["type"] == "crumb"]
    assert crumbs and [u for u, n in collections.Counter(c["url"] for c in crumbs).items() if n > 1] == []
    by_url = {c["url"]: c["item"] for c in crumbs}
    final = {p["url"]: p["final_url"] for p in pages}
    reach: dict[str, set[str]] = {}
    for page in pages:  # the URLs a page's links lead to, through redirect chains
        got = set(page["links"])
        for _ in range(5):
            got |= {final[u] for u in got if u in final}
        reach[page["url"]] = got
    found = 0
    for url, crumb in by_url.items():
        if not crumb["from"]:
            assert crumb["hops"] == 0 and url in seeds, crumb
            continue
        found += 1
        assert url in reach[crumb["from"]], crumb
        assert crumb["hops"] == by_url[crumb["from"]]["hops"] + 1 >= 1, crumb
    assert all(s not in by_url or not by_url[s]["from"] for s in seeds)
    return found


def test_the_embedded_crawl_hands_link_meta_to_the_page_it_finds(tmp_path: Path) -> None:
    with TestbedProcess(4, 15, seed=51, workdir=tmp_path / "tb") as tb:
        out = tmp_path / "out"
        summary = _summary(_run(crawl_cmd(tb, out, "--plugin", PLUGIN)))
        seeds = list(tb.seeds)
    items = list(iter_items(out))
    found = judge_crumbs(items, list(iter_pages(out, text=False)), seeds)
    assert found >= 20 and summary["items"]["errors"] == 0


def test_the_fleet_hands_link_meta_to_the_page_it_finds_through_hbase(
    rabbitmq: str, fleet: Any, tmp_path: Path, hbase_prefix: str, hbase_thrift: tuple[str, int]
) -> None:
    prefix = f"{hbase_prefix}lm"
    env = {"CRAWLFLEET_PLUGINS_ENABLED": PLUGIN, "CRAWLFLEET_STORE_KIND": "hbase",
           "CRAWLFLEET_STORE_HBASE_PREFIX": prefix}  # fmt: skip
    with TestbedProcess(4, 15, seed=52, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH, extra_env=env)
        f.crawl_to_end(1)
        seeds = list(tb.seeds)
    spec = f"hbase://{hbase_thrift[0]}:{hbase_thrift[1]}/{prefix}"
    found = judge_crumbs(list(iter_items(f.out / "items")), list(iter_pages(spec, text=False)), seeds)
    assert found >= 20
