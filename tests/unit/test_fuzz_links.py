"""Fuzzing link extraction (pipeline/links/extract.py) with hostile HTML shapes (tests/unit/test_links_props.py
already throws random bytes and tag soup at it).

Contracts: ``extract`` never raises; every link is normalized (normalize(url) == url); at most
``max_links`` links, with ``truncated`` set exactly when more were there; ``base_href`` is '' or a
normalized URL; huge, deep or oddly encoded pages give fewer links, never an exception.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.links.extract import extract
from pipeline.urls import normalize

hrefs = st.sampled_from([
    "/a", "b/c", "../../x", "//other.test/p", "http://h.test/%zz", "javascript:alert(1)", "mailto:x@y", "#top",
    "\x00/nul", "/pct%00", "http://xn--.test/", "http://b\u00fccher.test/", "http://" + "a" * 70 + ".test/",
    "http://[::1]:0/", "http://2130706433/", " \t/spaced\n ", "data:text/html,hi", "?q=1", "http://h.test:99999/",
    "\u202e/rtl", "/\ud7ff", "http://user:pw@h.test/", "HTTP://H.TEST/A/./B/../C",
])  # fmt: skip
charsets = st.sampled_from(["", "utf-8", "latin1", "windows-1252", "shift_jis", "utf-16", "x-unknown", "utf-7", "\x00"])
bases = st.sampled_from(["http://h.test/dir/page", "https://h.test", "http://[::1]/", "not a url", "", "http://h.test:0/"])


@st.composite
def pages(draw: st.DrawFn) -> tuple[bytes, str]:
    depth = draw(st.integers(0, 3000))
    links = draw(st.lists(st.tuples(hrefs, st.booleans()), max_size=60))
    charset = draw(charsets)
    parts = [f"<html><head><meta charset='{charset}'>"]
    if draw(st.booleans()):
        parts.append(f"<base href='{draw(hrefs)}'>")
    if draw(st.booleans()):
        parts.append("<meta name=robots content='nofollow,noindex'>")
    parts.append("</head><body>" + "<div>" * depth)
    parts += [f"<a href='{h}'{' rel=nofollow' if nf else ''}>{h[:10]}</a>" for h, nf in links]
    parts.append("</div>" * (depth // 2) + draw(st.sampled_from(["", "</body></html>", "<a href='", "<!--"])))
    text = "".join(parts)
    enc = draw(st.sampled_from(["utf-8", "latin-1", "utf-16"]))
    return text.encode(enc, "replace"), f"text/html; charset={charset}" if draw(st.booleans()) else "text/html"


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pages(), bases, st.integers(1, 40))
def test_extract_contract(page: tuple[bytes, str], base: str, max_links: int) -> None:
    body, ctype = page
    out = extract(body, base_url=base, content_type=ctype, max_links=max_links)
    assert len(out.links) <= max_links
    for link in out.links:
        assert normalize(link.url) == link.url, link.url
    assert out.base_href == "" or normalize(out.base_href) == out.base_href
    if out.truncated:
        assert len(out.links) == max_links
    full = extract(body, base_url=base, content_type=ctype, max_links=10_000)
    # ">=" not ">": a page with exactly max_links links is flagged too (pinned below)
    assert not out.truncated or len(full.links) >= max_links
    assert [lk.url for lk in out.links] == [lk.url for lk in full.links][: len(out.links)]


def test_million_links_are_capped() -> None:
    body = b"<html><body>" + b"".join(b"<a href='/m/%d'>x</a>" % i for i in range(200_000)) + b"</body></html>"
    out = extract(body, base_url="http://h.test/", max_links=10_000)
    assert len(out.links) == 10_000 and out.truncated


TRUNCATED_OFF_BY_ONE = (
    "ExtractedPage.truncated is set when a page has exactly max_links links, although nothing was cut (the "
    "docstring: 'set when max_links cut the list short'), so link-truncation counters over-count. Fix "
    "(pipeline/links/extract.py): set truncated only when a further link is found after the list is full."
)


def test_exactly_max_links_is_not_truncated() -> None:
    out = extract(b"<a href='/a'>a</a><a href='/b'>b</a>", base_url="http://h.test/", max_links=2)
    assert len(out.links) == 2 and not out.truncated
