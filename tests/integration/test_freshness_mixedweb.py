"""The freshness bench's web over real HTTP on loopback (#23 point 8): ``freshweb.MixedTestbed`` serves the
``measured`` change mix (what the server sends is what the truth of that mix says), and its access log
feeds ``conditional_figures``: a conditional re-fetch of an unchanged page is a 304 on an honouring host."""

from __future__ import annotations

import http.client
import time
from pathlib import Path

import pytest

from pipeline.harness.bench.freshweb import MixedTestbed, conditional_figures
from pipeline.harness.testbed.liverender import honours_conditional
from pipeline.harness.testbed.livetruth import edition_of, page_version
from pipeline.harness.testbed.living import DAILY, MEASURED, STATIC, page_class
from pipeline.harness.testbed.model import Web, host_name

pytestmark = pytest.mark.integration


def get(
    tb: MixedTestbed, i: int, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    host = host_name(i)
    conn = http.client.HTTPConnection(tb.info["host_ips"][host], tb.port, timeout=30)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{tb.port}", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_the_mixed_testbed_serves_the_measured_mix(tmp_path: Path) -> None:
    with MixedTestbed(6, 20, mix=MEASURED, seed=4, mutate_rate=4 * 86400.0, workdir=tmp_path / "tb") as tb:
        assert tb.living is not None and tb.living.mix == MEASURED
        web = Web(6, 20, seed=4, port=tb.port, living=tb.living)
        # a daily page at four days per wall second (a forced change at least every 64 ticks of 0.065 s): its served edition is the mix's version, and it moves
        i, m = next((i, m) for i in range(6) for m in range(20) if page_class(4, i, m, mix=MEASURED) == DAILY)
        editions = set()
        for _ in range(4):
            wall = time.time()
            status, _, body = get(tb, i, web.page_path(m))
            after = time.time()
            assert status == 200
            url = web.url(i, web.page_path(m))
            truths = {page_version(web, url, tb.living.test_time(w)).version for w in (wall, after)}  # type: ignore[union-attr]
            assert edition_of(body) in truths
            editions.add(edition_of(body))
            time.sleep(1.5)
        assert len(editions) >= 2
        # a static page on an honouring host: a conditional re-fetch is a 304
        j, n = next((i, m) for i in range(6) for m in range(20)
                    if honours_conditional(i) and page_class(4, i, m, mix=MEASURED) == STATIC)  # fmt: skip
        start = time.time()
        status, headers, _ = get(tb, j, web.page_path(n))
        assert status == 200
        status, _, body = get(tb, j, web.page_path(n), {"If-None-Match": headers["etag"]})
        assert status == 304 and body == b""
        tb.wait_log_flush()
        got = conditional_figures(web, tb.read_access_log(), since=start, until=time.time() + 1)
        assert got["share_304_honouring_hosts"] == 1.0 and got["status_304"] == 1
