"""The testbed model and renderer: determinism, sizes, link forms that resolve to the model's targets."""

from __future__ import annotations

from protego import Protego
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from pipeline.harness.testbed.model import Web, host_index, ip_for_host, n_ips
from pipeline.harness.testbed.render import Renderer
from pipeline.urls import join, normalize


def _links_of(html: bytes, page_url: str) -> list[str]:
    tree = HTMLParser(html)
    base = page_url
    node = tree.css_first("base[href]")
    if node is not None:
        base = join(page_url, node.attributes["href"] or "")
    out = []
    for a in tree.css("a[href]"):
        url = normalize(join(base, a.attributes["href"] or ""))
        assert url is not None
        out.append(url)
    return out


def test_same_params_same_pages() -> None:
    a, b = Renderer(Web(10, 30, seed=7)), Renderer(Web(10, 30, seed=7))
    for i in range(10):
        for path in ("/", "/p/0", "/p/17", "/robots.txt"):
            assert a.reply(i, path) == b.reply(i, path)
    assert Renderer(Web(10, 30, seed=8)).reply(3, "/p/5").body != a.reply(3, "/p/5").body


def test_page_sizes_and_link_counts() -> None:
    web = Web(30, 100, seed=1)
    r = Renderer(web)
    for i in range(0, 30, 7):
        for m in range(0, 100, 13):
            body = r.reply(i, web.page_path(m)).body
            assert 10_000 <= len(body) <= 32_000
            links = web.links(i, m)
            assert 15 <= len(links) <= 35
            cross = sum(1 for x in links if x.host != i)
            assert 1 <= cross <= 4  # 1-3 plus maybe the duplicate


def test_rendered_links_resolve_to_model_targets() -> None:
    web = Web(12, 40, seed=3, port=8080)
    r = Renderer(web)
    forms: set[str] = set()
    for i in range(12):
        for m in range(40):
            url = web.url(i, web.page_path(m))
            got = _links_of(r.reply(i, web.page_path(m)).body, url)
            want = [web.url(x.host, x.path) for x in web.links(i, m)]
            assert sorted(got) == sorted(want), url
            forms.update(x.href.split("/")[0] for x in web.links(i, m))
    # relative, root-relative, absolute, uppercase host and scheme-relative forms all appear
    assert {"", ".", "..", "http:"} <= forms
    hrefs = [x.href for i in range(12) for m in range(40) for x in web.links(i, m)]
    assert any("SITE" in h for h in hrefs) and any(h.endswith("#sec") for h in hrefs)
    assert any(h.startswith("//") for h in hrefs)


def test_every_page_reachable_via_next_links() -> None:
    web = Web(3, 25)
    for i in range(3):
        for m in range(24):
            assert any(x.host == i and x.path == web.page_path(m + 1) for x in web.links(i, m))


def test_ip_mapping_shares_addresses() -> None:
    assert n_ips(1) == 1 and n_ips(20) == 7 and n_ips(1000) == 64
    ips = [ip_for_host(i, 20) for i in range(20)]
    assert len(set(ips)) == 7 and all(ip.startswith("127.0.10.") for ip in ips)
    assert ip_for_host(0, 20) == ip_for_host(7, 20)


def test_host_index_parsing() -> None:
    assert host_index("site3.crawl.test", 5) == 3
    assert host_index("site5.crawl.test", 5) == -1
    assert host_index("site03.crawl.test", 5) == -1
    assert host_index("www.crawl.test", 5) == -1


def test_robots_texts_parse_and_group_choice() -> None:
    web = Web(20, 10)
    texts = {i: web.robots_txt(i) for i in range(20)}
    assert sum(t is None for t in texts.values()) >= 10
    for i, txt in texts.items():
        if txt is None:
            continue
        rp = Protego.parse(txt)
        priv = web.url(i, "/private/0")
        if i == 2:  # the 'crawlfleet' group differs from '*'
            assert rp.can_fetch(priv, "crawlfleet") and not rp.can_fetch(priv, "otherbot")
            assert not rp.can_fetch(web.url(i, "/agentonly/0"), "crawlfleet")
        elif i % 4 == 1:
            assert not rp.can_fetch(priv, "crawlfleet")
        if i == 3:
            assert rp.crawl_delay("crawlfleet") == 0.2


def test_specials_render() -> None:
    web = Web(10, 10)
    r = Renderer(web)
    assert r.reply(0, "/r/1").status == 301 and r.reply(0, "/r2/1").status == 302
    assert r.reply(0, "/moved/1").status == 200
    assert r.reply(0, "/loop/a").status == 302 and r.reply(0, "/loop/b").status == 302
    assert r.reply(1, "/missing/0").status == 404 and r.reply(1, "/error/2").status == 500
    assert r.reply(4, "/slow").delay_s > 1 and dict(r.reply(4, "/gzip").headers)["Content-Encoding"] == "gzip"
    assert len(r.reply(5, "/big").body) >= 5 * 1024 * 1024
    assert r.reply(5, "/file.bin").content_type == "application/octet-stream"
    latin = r.reply(6, "/latin1")
    assert "iso-8859-1" in latin.content_type
    try:
        latin.body.decode("utf-8")
        raise AssertionError("latin1 page must not be valid UTF-8")
    except UnicodeDecodeError:
        pass
    assert b"/calendar/2024/2" in r.reply(7, "/calendar/2024/1").body
    assert b"/calendar/2025/1" in r.reply(7, "/calendar/2024/12").body
    assert b'content="nofollow"' in r.reply(8, "/metanf").body
    assert b'rel="nofollow"' in r.reply(8, "/").body
    assert r.reply(3, "/r/1").status == 404  # specials only on their host
    assert r.reply(0, "/p/9").status == 404 and r.reply(0, "/p/08").status == 404


def test_targets_match_links() -> None:
    web = Web(9, 30, seed=5)
    for i in range(9):
        for m in range(30):
            assert web.targets(i, m) == [(x.host, x.path, x.nofollow) for x in web.links(i, m)]
