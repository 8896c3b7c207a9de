"""The living testbed (``testbed serve --mutate``) over real HTTP on loopback: ETag, Last-Modified, 304,
pages that change, sitemaps (robots lines, index, gzip, sitemap-only pages, hostile files), and the
static web left as it was. Both HTTP engines."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.liverender import honours_conditional
from pipeline.harness.testbed.livetruth import edition_of
from pipeline.harness.testbed.living import FAST, STATIC, page_class
from pipeline.harness.testbed.model import Web
from pipeline.harness.testbed.sitemapgen import sitemap_truth
from pipeline.harness.testbed.validators import digest
from pipeline.links.sitemaps import SitemapWalk, parse_sitemap, robots_sitemaps, same_site

pytestmark = pytest.mark.integration
HOSTS, PAGES, RATE = 12, 20, 60.0


@pytest.fixture(scope="module", params=["fast", "aiohttp"])
def tb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestbedProcess]:
    workdir = tmp_path_factory.mktemp(f"tb_living_{request.param}")
    with TestbedProcess(
        HOSTS, PAGES, mutate=True, mutate_rate=RATE, engine=request.param, workdir=workdir
    ) as t:
        yield t


def get(
    tb: TestbedProcess, url: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    conn = http.client.HTTPConnection(tb.info["host_ips"][host], tb.port, timeout=30)
    try:
        conn.request("GET", parts.path or "/", headers={"Host": f"{host}:{tb.port}", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def page(web: Web, cls: str, *, conditional: bool = True) -> str:
    i, m = next(
        (i, m)
        for i in range(web.hosts)
        for m in range(web.pages)
        if page_class(web.seed, i, m) == cls and honours_conditional(i) == conditional
    )
    return web.url(i, web.page_path(m))


def test_ready_file_names_the_clock_and_truth_matches_what_is_served(tb: TestbedProcess) -> None:
    living = tb.living
    assert living is not None and living.rate == RATE
    url = page(tb.web, STATIC)
    status, headers, body = get(tb, url)
    truth = tb.versions_at()[url]
    assert status == 200 and digest(body) == truth.digest and headers["etag"] == truth.etag
    assert "last-modified" in headers


def test_conditional_get_answers_304_without_a_body(tb: TestbedProcess) -> None:
    url = page(tb.web, STATIC)
    _, headers, _ = get(tb, url)
    for cond in ({"If-None-Match": headers["etag"]}, {"If-Modified-Since": headers["last-modified"]}):
        status, h304, body = get(tb, url, cond)
        assert status == 304 and body == b"" and h304["etag"] == headers["etag"]
    status, _, body = get(tb, url, {"If-None-Match": '"stale"'})
    assert status == 200 and body
    ignoring = page(tb.web, STATIC, conditional=False)
    _, headers, _ = get(tb, ignoring)
    assert get(tb, ignoring, {"If-None-Match": headers["etag"]})[0] == 200


def test_a_fast_page_changes_and_its_old_etag_then_gets_200(tb: TestbedProcess) -> None:
    url = page(tb.web, FAST)
    _, first, body = get(tb, url)
    deadline = time.monotonic() + 60  # changes come every ~0.1 s of wall time at this rate
    while True:
        status, headers, new_body = get(tb, url, {"If-None-Match": first["etag"]})
        if status == 200:
            break
        assert status == 304 and time.monotonic() < deadline
        time.sleep(0.02)
    assert headers["etag"] != first["etag"] and new_body != body
    # the versions the bodies show (not the truth at the moment of asking, which may have moved on)
    assert edition_of(body) < edition_of(new_body) <= tb.versions_at(digests=False)[url].version


def test_sitemaps_over_http_find_the_sitemap_only_pages_and_refuse_the_hostile_files(
    tb: TestbedProcess,
) -> None:
    if tb.engine != "fast":
        pytest.skip("both engines send LiveRenderer's bytes; the ~10 s walk runs once, on the default engine")
    web = tb.web
    truth = sitemap_truth(web)
    walk = SitemapWalk()
    for i in range(web.hosts):
        status, _, robots = get(tb, web.url(i, "/robots.txt"))
        roots = robots_sitemaps(robots.decode()) if status == 200 else []
        assert roots == web.sitemap_urls(i)
        walk.add_roots(roots)
    while (item := walk.next_file()) is not None:
        u, depth = item
        status, _, body = get(tb, u)
        if status != 200:
            walk.failed(u, f"http_{status}")
            continue
        walk.fed(u, depth, parse_sitemap(body, url=u, in_scope=same_site(u)))
    only = truth["sitemap_only"]
    assert isinstance(only, list) and only and set(only) <= set(walk.pages)
    for u in only:
        assert get(tb, u)[0] == 200
    hostile = truth["hostile"]
    assert isinstance(hostile, dict)
    for u, expected in hostile.items():
        if expected == "depth":
            assert "depth" in walk.errors.values()
        elif expected != "ok":
            assert walk.errors.get(u) == expected, (u, walk.errors.get(u))
    assert get(tb, web.url(1, "/sitemaps/0.xml.gz"))[1]["content-type"] == "application/gzip"


def test_304s_are_in_the_access_log(tb: TestbedProcess) -> None:
    url = page(tb.web, STATIC)
    _, headers, _ = get(tb, url)
    get(tb, url, {"If-None-Match": headers["etag"]})
    tb.wait_log_flush()
    path = urlsplit(url).path
    assert any(e["status"] == 304 and e["path"] == path for e in tb.read_access_log())


def test_the_static_web_is_untouched(testbed_small: TestbedProcess) -> None:
    assert testbed_small.living is None and "mutate" not in json.loads(testbed_small.ready_file.read_text())
    url = testbed_small.url(0, "/p/1")
    status, headers, _ = get(testbed_small, url, {"If-None-Match": "*"})
    assert status == 200 and "etag" not in headers and "last-modified" not in headers
    _, _, robots = get(testbed_small, testbed_small.url(1, "/robots.txt"))
    assert b"Sitemap" not in robots
    assert get(testbed_small, testbed_small.url(0, "/sitemap.xml"))[0] == 404
