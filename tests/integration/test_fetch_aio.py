"""AioFetcher and ThreadedFetcher (same rules, same records) against the testbed: statuses, redirects, loops, robots, caps, encodings, DNS and SSRF
failures, all judged from the results and the testbed's access log."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fetchers.aio import AioFetcher
from fetchers.h1 import H1Fetcher
from fetchers.records import FetchResult
from fetchers.testing import bed_resolver, bed_settings, make_batch
from fetchers.threaded import ThreadedFetcher
from pipeline.urls import Scope

pytestmark = pytest.mark.integration

MAX_BODY = 1024 * 1024


@pytest.fixture(scope="module", params=[AioFetcher, ThreadedFetcher, H1Fetcher], ids=["aio", "threaded", "h1"])
def run(request: pytest.FixtureRequest, testbed_small: Any) -> dict[str, Any]:
    fetcher_cls = request.param
    tb = testbed_small
    u = tb.url
    port = tb.port
    urls = {
        "home": u(0, "/"),
        "redirect": u(0, "/r/0"),
        "loop": u(0, "/loop/a"),
        "missing": u(1, "/missing/0"),
        "error": u(1, "/error/1"),
        "private": u(1, "/private/0"),
        "agent_private": u(2, "/private/1"),
        "agent_only": u(2, "/agentonly/1"),
        "slow": u(4, "/slow"),
        "gzip": u(4, "/gzip"),
        "big": u(5, "/big"),
        "bin": u(5, "/file.bin"),
        "latin1": u(6, "/latin1"),
        "nxdomain": f"http://nosuchhost.crawl.test:{port}/",
        "ssrf_dns": f"http://private.crawl.test:{port}/",
        "ssrf_literal": f"http://127.0.0.1:{port}/",
        "allowed_literal": f"http://127.0.10.1:{port}/",
        "invalid": "ftp://site0.crawl.test/x",
        "out_of_scope": f"http://site0.elsewhere.test:{port}/",
    }
    settings = bed_settings(
        tb.dns_server,
        fetch={"retries": 1, "retry_backoff_s": 0.05, "max_body_bytes": MAX_BODY},
        politeness={"min_host_delay_s": 0.0},
    )
    scope = Scope.build([u(0, "/")], allowed_domains=("crawl.test", "127.0.0.1", "127.0.10.1"))
    order: list[FetchResult] = []

    async def go() -> Any:
        async with fetcher_cls(settings, fetcher_id="t1", resolver=bed_resolver(settings), scope=scope) as f:
            return await f.fetch_batch(make_batch(list(urls.values()), serial=7, fetcher_id="t1"), order.append)

    begin = tb.mark("begin")
    report = asyncio.run(go())
    end = tb.mark("end")
    by_url = {r.url: r for r in order}
    return {
        "r": {k: by_url[v] for k, v in urls.items()},
        "order": [r.url for r in order],
        "urls": urls,
        "report": report,
        # the testbed is shared: keep only this run's requests
        "log": tb.log_between(begin, end),
    }


def _hits(log: list[dict[str, Any]], host: str, path: str) -> int:
    return sum(1 for e in log if e["host"] == host and e["path"] == path)


def test_one_result_per_url_streamed(run: dict[str, Any]) -> None:
    assert sorted(run["order"]) == sorted(run["urls"].values())
    # Results stream as URLs complete: a fast page is reported before the 1.5 s /slow page.
    assert run["order"].index(run["urls"]["home"]) < run["order"].index(run["urls"]["slow"])
    rep = run["report"]
    assert rep.serial == 7 and rep.fetcher_id == "t1" and rep.unfinished == []
    assert rep.pages == len(run["urls"])
    assert all(r.serial == 7 and r.fetcher_id == "t1" for r in run["r"].values())


def test_ok_page(run: dict[str, Any]) -> None:
    r = run["r"]["home"]
    assert r.ok and r.status == 200 and r.content_type == "text/html"
    assert b"<html" in r.body.lower() and r.body_bytes == len(r.body)
    assert r.ip.startswith("127.0.10.") and r.timings.total_s > 0
    assert run["report"].host_ips[r.url.split("/")[2]] == r.ip


def test_redirect_chain_followed(run: dict[str, Any]) -> None:
    r = run["r"]["redirect"]
    assert r.status == 200 and r.final_url.endswith("/moved/0")
    assert [x.rsplit("/", 2)[-2] for x in r.redirects] == ["r", "r2"]


def test_redirect_loop_detected(run: dict[str, Any]) -> None:
    r = run["r"]["loop"]
    assert r.error_class == "redirect_loop" and r.status in (301, 302, 307, 308)


def test_statuses_and_retry_only_for_5xx(run: dict[str, Any]) -> None:
    log = run["log"]
    assert run["r"]["missing"].status == 404 and not run["r"]["missing"].error_class
    assert run["r"]["error"].status == 500
    assert _hits(log, "site1.crawl.test", "/missing/0") == 1  # 404 is not retried
    assert _hits(log, "site1.crawl.test", "/error/1") == 2  # 500 retried once (retries=1)


def test_robots_blocked_never_fetched(run: dict[str, Any]) -> None:
    log = run["log"]
    assert run["r"]["private"].error_class == "robots_blocked"
    assert _hits(log, "site1.crawl.test", "/private/0") == 0
    # host 2 has a 'crawlfleet' group: /agentonly/ is ours to avoid, /private/ (only for '*') is allowed.
    assert run["r"]["agent_only"].error_class == "robots_blocked"
    assert _hits(log, "site2.crawl.test", "/agentonly/1") == 0
    assert run["r"]["agent_private"].error_class == "" and run["r"]["agent_private"].status == 200
    assert _hits(log, "site1.crawl.test", "/robots.txt") == 1  # once per host, however many URLs


def test_body_cap_truncates(run: dict[str, Any]) -> None:
    r = run["r"]["big"]
    assert r.status == 200 and r.truncated and len(r.body) == MAX_BODY and not r.error_class


def test_gzip_decoded_and_types(run: dict[str, Any]) -> None:
    g = run["r"]["gzip"]
    assert g.headers.get("content-encoding") == "gzip" and g.body.lstrip().lower().startswith(b"<")
    assert g.wire_bytes < g.body_bytes
    assert run["r"]["bin"].content_type == "application/octet-stream" and len(run["r"]["bin"].body) > 0
    assert run["r"]["latin1"].content_type == "text/html" and run["r"]["latin1"].ok


def test_clean_errors(run: dict[str, Any]) -> None:
    r = run["r"]
    assert r["nxdomain"].error_class == "dns_nxdomain"
    assert r["ssrf_dns"].error_class == "ssrf_blocked" and "127.0.0.53" in r["ssrf_dns"].error_message
    assert r["ssrf_literal"].error_class == "ssrf_blocked"
    assert r["allowed_literal"].error_class == ""  # inside --allow-network
    assert r["invalid"].error_class == "invalid_url"
    assert r["out_of_scope"].error_class == "out_of_scope"
    for key in ("nxdomain", "ssrf_dns", "ssrf_literal", "invalid", "out_of_scope"):
        assert r[key].status == 0 and r[key].error_message
    hosts = {e["host"] for e in run["log"]}
    assert "private.crawl.test" not in hosts  # the refused address never saw a request
