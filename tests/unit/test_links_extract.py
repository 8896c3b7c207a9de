"""pipeline.links.extract.extract on tricky HTML: base href, relative forms, entities, encodings, junk."""

from __future__ import annotations

import pytest

from pipeline.links.extract import extract
from pipeline.urls import normalize

BASE = "https://www.example.com/dir/page.html?x=1"


def urls(body: bytes | str, base: str = BASE, **kw: object) -> list[str]:
    raw = body.encode() if isinstance(body, str) else body
    return [link.url for link in extract(raw, base_url=base, **kw).links]  # type: ignore[arg-type]


def test_relative_forms_resolve_against_the_final_url() -> None:
    html = """
    <a href="a.html">plain</a>
    <a href="./b.html">dot</a>
    <a href="../c.html">up</a>
    <a href="/root">root</a>
    <a href="//cdn.example.org/x">proto-relative</a>
    <a href="?page=2">query only</a>
    <a href="sub/../d.html">dots inside</a>
    <a href="">empty</a>
    <a href="#frag">fragment only</a>
    """
    assert urls(html) == [
        "https://www.example.com/dir/a.html",
        "https://www.example.com/dir/b.html",
        "https://www.example.com/c.html",
        "https://www.example.com/root",
        "https://cdn.example.org/x",
        "https://www.example.com/dir/page.html?page=2",
        "https://www.example.com/dir/d.html",
    ]


def test_protocol_relative_takes_the_page_scheme() -> None:
    assert urls('<a href="//h.example.org/p">x</a>', base="http://a.example.com/") == ["http://h.example.org/p"]


def test_base_href_wins_and_may_be_relative() -> None:
    html = '<head><base href="/other/"><base href="https://ignored.example/"></head><a href="x">x</a>'
    page = extract(html.encode(), base_url=BASE)
    assert page.base_href == "https://www.example.com/other/"
    assert [link.url for link in page.links] == ["https://www.example.com/other/x"]


def test_unusable_base_href_is_ignored() -> None:
    html = '<base href="javascript:alert(1)"><a href="x">x</a>'
    page = extract(html.encode(), base_url=BASE)
    assert page.base_href == ""
    assert [link.url for link in page.links] == ["https://www.example.com/dir/x"]


def test_non_http_schemes_are_dropped() -> None:
    html = """
    <a href="javascript:void(0)">js</a><a href="JavaScript:alert(1)">js2</a><a href="mailto:a@b.c">m</a>
    <a href="data:text/html,hi">d</a><a href="tel:+123">t</a><a href="ftp://f.example/x">f</a>
    <a href=" https://ok.example/ ">ok</a>
    """
    assert urls(html) == ["https://ok.example/"]


def test_entities_in_urls_and_anchors_are_decoded() -> None:
    page = extract(b'<a href="/s?a=1&amp;b=2&#38;c=3">Tom &amp; Jerry&nbsp;!</a>', base_url=BASE)
    assert page.links[0].url == "https://www.example.com/s?a=1&b=2&c=3"
    assert page.links[0].anchor == "Tom & Jerry !"


def test_whitespace_tabs_newlines_and_backslashes_in_href() -> None:
    assert urls('<a href="  /a\n/b\t.html ">x</a><a href="\\\\h.example\\p">y</a>') == [
        "https://www.example.com/a/b.html",
        "https://h.example/p",
    ]


def test_normalization_is_applied() -> None:
    assert urls('<a href="HTTPS://WWW.EXAMPLE.COM:443/a/./b/../c#top">x</a>') == ["https://www.example.com/a/c"]


def test_nofollow_per_link_and_meta_robots() -> None:
    html = """<head><meta name="Robots" content="NOINDEX, nofollow"></head>
    <a href="/a" rel="NoFollow ugc">a</a><a href="/b" rel="noopener">b</a>"""
    page = extract(html.encode(), base_url=BASE)
    assert page.meta_nofollow and page.meta_noindex
    assert [(link.url.rsplit("/", 1)[1], link.nofollow) for link in page.links] == [("a", True), ("b", False)]


def test_meta_robots_none_means_both() -> None:
    page = extract(b'<meta name="robots" content="none"><a href="/a">a</a>', base_url=BASE)
    assert page.meta_nofollow and page.meta_noindex


def test_area_links_and_image_alt_as_anchor() -> None:
    page = extract(b'<map><area href="/area"></map><a href="/img"><img src="i.png" alt=" Logo "></a>', base_url=BASE)
    assert [(link.url, link.anchor) for link in page.links] == [
        ("https://www.example.com/area", ""),
        ("https://www.example.com/img", "Logo"),
    ]


def test_broken_markup_still_yields_links() -> None:
    html = b'<html><body><div><a href="/one">one<p><a href=/two>two</div></b><a href="/three'
    # The HTML parser re-opens the unclosed first <a> inside <p> (as browsers do), so /one may repeat.
    assert {"https://www.example.com/one", "https://www.example.com/two"} <= set(urls(html))


def test_latin1_page_without_declaration_keeps_its_links() -> None:
    body = '<a href="caf\xe9.html">caf\xe9</a><a href="/plain">p</a>'.encode("latin-1")
    page = extract(body, base_url="http://h.test/")
    assert [link.url for link in page.links] == ["http://h.test/caf%C3%A9.html", "http://h.test/plain"]
    assert page.links[0].anchor == "caf\xe9"


def test_charset_from_meta_and_from_header() -> None:
    body = '<meta charset="windows-1251"><a href="/\u043f">\u043f\u0440\u0438\u0432\u0435\u0442</a>'.encode("cp1251")
    assert extract(body, base_url="http://h.test/").links[0].anchor == "\u043f\u0440\u0438\u0432\u0435\u0442"
    body = '<a href="/x">\u00fcber</a>'.encode("latin-1")
    page = extract(body, base_url="http://h.test/", content_type="text/html; charset=ISO-8859-1")
    assert page.links[0].anchor == "\u00fcber"


def test_bogus_charset_labels_do_not_break_parsing() -> None:
    for ct in ("text/html; charset=base64", "text/html; charset=nonsense", "text/html; charset="):
        assert urls(b'<a href="/x">x</a>', content_type=ct) == ["https://www.example.com/x"]


def test_non_html_content_type_gives_nothing() -> None:
    assert urls(b'<a href="/x">x</a>', content_type="application/pdf") == []
    assert urls(b'<a href="/x">x</a>', content_type="application/xhtml+xml") == ["https://www.example.com/x"]


def test_huge_page_is_capped() -> None:
    body = b"<html><body>" + b"".join(b'<a href="/p%d">l</a>' % i for i in range(30_000)) + b"</body></html>"
    page = extract(body, base_url=BASE, max_links=10_000)
    assert len(page.links) == 10_000 and page.truncated
    assert extract(body, base_url=BASE, max_bytes=1000).links[-1].url.startswith("https://www.example.com/p")


def test_bad_base_url_still_gives_absolute_links() -> None:
    assert urls('<a href="/rel">r</a><a href="http://abs.example/">a</a>', base="not a url") == ["http://abs.example/"]


def test_junk_never_raises() -> None:
    for junk in (b"", b"\x00" * 100, bytes(range(256)) * 10, b"<a href=", b"<<<<>>>>", b"\xff\xfe<\x00a\x00"):
        assert isinstance(extract(junk, base_url=BASE).links, list)


def test_links_are_normalized_fixed_points() -> None:
    html = '<a href="/a b">s</a><a href="/%zz">p</a><a href="http://\u00fcber.example/\u00e9">i</a><a href="/x?q=\u00e9">q</a>'
    for url in urls(html):
        assert normalize(url) == url


def test_max_anchor_zero_skips_anchor_text() -> None:
    page = extract(b'<a href="/x">some text</a>', base_url=BASE, max_anchor=0)
    assert [(link.url, link.anchor) for link in page.links] == [("https://www.example.com/x", "")]


def test_link_memo_is_bounded_and_keeps_what_is_used_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.links import hrefs

    monkeypatch.setattr(hrefs, "_MEMO_HALF", 50)
    monkeypatch.setattr(hrefs, "_MEMO", {})
    monkeypatch.setattr(hrefs, "_MEMO_OLD", {})
    resolved: list[str] = []
    real = hrefs.Resolver._resolve

    def counting(self: hrefs.Resolver, href: str) -> str | None:
        resolved.append(href)
        return real(self, href)

    monkeypatch.setattr(hrefs.Resolver, "_resolve", counting)
    nav = '<a href="/about">about</a>'
    for page in range(40):  # every page: the navigation link and 10 one-off links
        body = nav + "".join(f'<a href="/p/{page}/{k}">x</a>' for k in range(10))
        got = extract(body.encode(), base_url=f"http://a.test/p/{page}")
        assert got.links[0].url == "http://a.test/about" and len(got.links) == 11
        assert len(hrefs._MEMO) + len(hrefs._MEMO_OLD) <= 100
    assert resolved.count("/about") == 1  # resolved once: it outlived ~400 one-off links
    assert len(resolved) == 1 + 400
