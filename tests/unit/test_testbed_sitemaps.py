"""The living testbed's sitemaps, read with pipeline.links.sitemaps (pure: no HTTP; the integration test
tests/integration/test_testbed_living_http.py does the same over loopback)."""

from __future__ import annotations

import math
from urllib.parse import urlsplit

from pipeline.harness.testbed.liverender import LiveRenderer
from pipeline.harness.testbed.living import Living, state
from pipeline.harness.testbed.model import HOSTILE_SITEMAP_SLOT, Web, host_index
from pipeline.harness.testbed.sitemapgen import HOSTILE_EXPECT, sitemap_truth
from pipeline.harness.testbed.truth import compute_truth
from pipeline.links.sitemaps import SitemapWalk, parse_sitemap, robots_sitemaps, same_site

EPOCH = 1_800_000_000.0
T = 500.0


def walk_host(web: Web, roots: list[str], t: float = T) -> SitemapWalk:
    live = LiveRenderer(web)
    walk = SitemapWalk()
    walk.add_roots(roots)
    while (item := walk.next_file()) is not None:
        u, depth = item
        parts = urlsplit(u)
        reply = live.reply(host_index(parts.hostname or "", web.hosts), parts.path, web.living.wall_time(t))  # type: ignore[union-attr]
        if reply.status != 200:
            walk.failed(u, f"http_{reply.status}")
            continue
        walk.fed(u, depth, parse_sitemap(reply.body, url=u, in_scope=same_site(u)))
    return walk


def test_every_sitemap_host_lists_all_its_pages_and_the_sitemap_only_ones() -> None:
    web = Web(12, 25, seed=1, port=8080, living=Living(EPOCH, 3.0, hostile_sitemaps=False))
    linked = set(compute_truth(web)["pages"])
    for i in range(web.hosts):
        roots = robots_sitemaps(web.robots_txt(i) or "")
        assert roots == web.sitemap_urls(i)
        if i % 3 == 2:
            assert roots == [] and web.sitemap_only_paths(i) == []
            continue
        walk = walk_host(web, roots)
        assert walk.errors == {}
        normal = {web.url(i, web.page_path(m)) for m in range(web.pages)}
        only = {web.url(i, p) for p in web.sitemap_only_paths(i)}
        assert set(walk.pages) == normal | only and len(only) == 3
        assert not only & linked  # reachable only through the sitemap
        for m in range(web.pages):
            entry = walk.pages[web.url(i, web.page_path(m))]
            wall = web.living.wall_time(state(web.seed, i, m, T).modified_at)  # type: ignore[union-attr]
            day = math.floor(wall / 86400) * 86400.0
            assert entry.lastmod == (day if m % 5 == 4 else math.floor(wall))


def test_index_host_uses_a_gzip_part() -> None:
    web = Web(4, 10, port=8080, living=Living(EPOCH))
    live = LiveRenderer(web)
    r = live.reply(1, "/sitemaps/0.xml.gz", EPOCH)
    assert r.status == 200 and r.body[:2] == b"\x1f\x8b" and r.content_type == "application/gzip"
    assert [
        e.loc for e in parse_sitemap(live.reply(1, "/sitemap_index.xml", EPOCH).body, url="u").sitemaps
    ] == [
        web.url(1, "/sitemaps/0.xml.gz"),
        web.url(1, "/sitemaps/1.xml"),
    ]


def test_hostile_sitemaps_each_give_their_clean_error() -> None:
    web = Web(12, 10, port=8080, living=Living(EPOCH))
    truth = sitemap_truth(web)
    hostile = truth["hostile"]
    assert isinstance(hostile, dict) and len(hostile) == len(HOSTILE_EXPECT)
    i = HOSTILE_SITEMAP_SLOT
    assert set(web.sitemap_urls(i)) >= set(hostile)
    for u, expected in hostile.items():
        walk = walk_host(web, [u])
        if expected == "ok":
            assert walk.errors == {} and set(walk.pages) == {web.url(i, p) for p in ("/", "/p/0", "/p/1")}
        else:
            assert expected in walk.errors.values(), (u, walk.errors)
        assert walk.files <= 4  # the chain and the loop stop at the depth limit


def test_without_hostile_sitemaps_none_are_listed_or_served() -> None:
    web = Web(12, 10, port=8080, living=Living(EPOCH, hostile_sitemaps=False))
    assert not any("/hs/" in u for i in range(12) for u in web.sitemap_urls(i))
    assert LiveRenderer(web).reply(HOSTILE_SITEMAP_SLOT, "/hs/bad.xml", EPOCH).status == 404
    assert sitemap_truth(web)["hostile"] == {}
