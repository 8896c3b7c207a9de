"""The freshness bench's measured 304 cost (``pipeline.harness.bench.wirecost``) against a real living
testbed on loopback: a 304 costs its headers only, a 200 its headers and body; the sums over a log's 304s
use those measured sizes, and a host that ignores validators gives no 304 cost."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.harness.bench.wirecost import probe_costs, saved_figures
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.liverender import honours_conditional
from pipeline.harness.testbed.model import Web

pytestmark = pytest.mark.integration
HOSTS, PAGES = 6, 4


@pytest.fixture(scope="module")
def tb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    with TestbedProcess(
        HOSTS, PAGES, mutate=True, mutate_rate=1.0, workdir=tmp_path_factory.mktemp("tb_wirecost")
    ) as t:
        yield t


def test_measured_304_is_headers_only_and_sums_use_it(tb: TestbedProcess) -> None:
    web = Web(HOSTS, PAGES, seed=tb.seed, port=tb.port, living=tb.living)
    urls = [web.url(i, web.page_path(m)) for i in range(HOSTS) for m in range(1, PAGES)]
    costs = probe_costs(web, urls)
    assert set(costs) == set(urls)
    for url, c in costs.items():
        assert c.status_plain == 200 and c.bytes_plain > c.request_plain
        assert c.request_conditional > c.request_plain  # the validators went out
        i = int(url.split("site")[1].split(".")[0])
        if honours_conditional(i):
            assert c.status_conditional == 304
            assert 0 < c.bytes_conditional < 400 < c.bytes_plain  # headers only against a whole page
        else:
            assert c.status_conditional == 200
    honoured = [u for u in urls if costs[u].status_conditional == 304]
    log = [{"host": u.split("//")[1].split("/")[0].split(":")[0], "path": "/" + u.split("/", 3)[3],
            "status": 304, "t": 1.0} for u in honoured + honoured[:1]]  # fmt: skip
    log.append({"host": f"site{HOSTS - 1}.crawl.test", "path": "/", "status": 304, "t": 1.0})  # not probed
    got = saved_figures(web, log, costs, conditional_sent=10)
    assert got["status_304_measured"] == len(honoured) + 1 and got["status_304_unmeasured"] == 1
    expect_304 = sum(costs[u].bytes_conditional for u in honoured) + costs[honoured[0]].bytes_conditional
    expect_200 = sum(costs[u].bytes_plain for u in honoured) + costs[honoured[0]].bytes_plain
    assert got["wire_bytes_304"] == expect_304 and got["wire_bytes_as_200"] == expect_200
    assert got["validators_request_bytes"] > 0 and got["wire_bytes_saved"] == (
        expect_200 - expect_304 - got["validators_request_bytes"]
    )
