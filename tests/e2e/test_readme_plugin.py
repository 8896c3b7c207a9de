"""The README's plugin example is this test: the code block after ``<!-- readme-plugin-example -->`` is
written to ``prices.py`` as a user would, and ``crawlfleet crawl --plugin prices:Prices`` crawls the
testbed's shop with it. Judged by the testbed's truth: one price item per microdata product, and no request
for the calendar trap the example's URL filter rejects."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from crawlfleet import iter_items
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.products import products_truth
from tests.e2e.test_embedded_crawl import MAX_DEPTH, crawl_cmd, fetch_counts

pytestmark = pytest.mark.e2e

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"<!-- readme-plugin-example -->\n```python\n(.*?)```", text, re.S)
    assert found, "the README lost its plugin example"
    return found.group(1)


def test_the_readme_example_is_about_twenty_lines() -> None:
    assert 12 <= len(readme_example().strip().splitlines()) <= 24


def test_the_readme_plugin_example_crawls_the_testbed_shop(tmp_path: Path) -> None:
    (tmp_path / "prices.py").write_text(readme_example())
    with TestbedProcess(8, 30, seed=61, workdir=tmp_path / "tb", products=True) as tb:
        out = tmp_path / "out"
        env = dict(os.environ, PYTHONPATH=str(tmp_path))
        proc = subprocess.run(crawl_cmd(tb, out, "--plugin", "prices:Prices"), env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        truth = tb.truth(max_depth=MAX_DEPTH)
        calendar = [k for k in fetch_counts(tb) if k[1].startswith("/calendar/")]
    # microdata carries itemprop=price: pages whose number is 1 or 2 mod 4 (products.py's table)
    web = tb.web
    want = sorted((p["url"], p["price"]) for p in products_truth(web, truth["pages"])
                  if web.page_number("/" + p["url"].split("/", 3)[3]) % 4 in (1, 2))  # fmt: skip
    got = sorted((i["url"], i["item"]["price"]) for i in iter_items(out, type="price"))
    assert want and got == want
    assert calendar == []
