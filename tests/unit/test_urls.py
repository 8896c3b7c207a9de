"""URL hygiene: normalization examples and properties, fingerprints, scope and trap rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.urls import (
    Scope,
    TrapRules,
    fingerprint,
    host_of,
    is_canonical,
    normalize,
    registered_domain,
    trap_reason,
)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("HTTP://Site1.Crawl.TEST:80/a/../b/./c?x=1#frag", "http://site1.crawl.test/b/c?x=1"),
        ("https://example.com:443", "https://example.com/"),
        ("http://example.com:8080/", "http://example.com:8080/"),
        ("http://user:pw@example.com/x", "http://example.com/x"),
        ("http://例え.jp/パス", "http://xn--r8jz45g.jp/%E3%83%91%E3%82%B9"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/%zz", "http://example.com/%25zz"),
        ("http://[::1]:80/x", "http://[::1]/x"),
        ("http://example.com./", "http://example.com/"),
        ("javascript:alert(1)", None),
        ("mailto:a@b.c", None),
        ("ftp://example.com/", None),
        ("http:///nohost", None),
        ("http://exa mple.com/", None),
        ("http://example.com:99999/", None),
        ("http://example.com/\x00", None),
        ("", None),
    ],
)
def test_normalize_examples(raw: str, want: str | None) -> None:
    assert normalize(raw) == want


def test_sort_query_is_optional() -> None:
    assert normalize("http://a.test/?b=2&a=1") == "http://a.test/?b=2&a=1"
    assert normalize("http://a.test/?b=2&a=1", sort_query=True) == "http://a.test/?a=1&b=2"


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=120))
def test_normalize_never_raises_on_junk(junk: str) -> None:
    out = normalize(junk)
    assert out is None or out.startswith(("http://", "https://"))


URLISH = st.builds(
    lambda scheme, host, port, path, query, frag: f"{scheme}://{host}{port}{path}{query}{frag}",
    st.sampled_from(["http", "HTTP", "https", "HtTpS"]),
    st.from_regex(r"([A-Za-z0-9]{1,10}\.){0,3}[A-Za-z][A-Za-z0-9]{0,9}", fullmatch=True),
    st.sampled_from(["", ":80", ":443", ":8080", ":1"]),
    st.lists(st.sampled_from(["a", "B", ".", "..", "%41", "%zz", "x y", "é", "", "~"]), max_size=6).map(
        lambda segs: "/" + "/".join(segs)
    ),
    st.sampled_from(["", "?", "?a=1", "?b=2&a=1", "?q=%20"]),
    st.sampled_from(["", "#", "#frag"]),
)


@settings(max_examples=400, deadline=None)
@given(URLISH)
def test_normalize_is_idempotent(url: str) -> None:
    once = normalize(url)
    assert once is not None
    assert normalize(once) == once
    assert is_canonical(once) in (True, False)  # never raises
    if is_canonical(once):
        assert normalize(once) == once
    assert "#" not in once


def test_fingerprint_and_host() -> None:
    u = "http://site3.crawl.test:8080/p/1"
    assert fingerprint(u) == fingerprint(u) and -(2**63) <= fingerprint(u) < 2**63
    assert fingerprint(u) != fingerprint(u + "0")
    assert host_of(u) == "site3.crawl.test:8080"
    # Host-clustered: one authority's URLs share the top 16 bits; other authorities (almost always) not.
    same = {fingerprint(f"http://site3.crawl.test:8080/p/{i}") >> 48 for i in range(50)}
    assert len(same) == 1
    others = {fingerprint(f"http://site{i}.crawl.test:8080/p/1") >> 48 for i in range(50)}
    assert len(others) > 40
    assert fingerprint("no-scheme") == fingerprint("no-scheme")  # junk never raises
    assert registered_domain("site3.crawl.test") == "crawl.test"
    assert registered_domain("www.bbc.co.uk") == "bbc.co.uk"


def test_scope_domains_and_regexes() -> None:
    scope = Scope.build(["http://site0.crawl.test:8080/"], deny_regex=(r"/private/",))
    assert scope.allows("http://site9.crawl.test:8080/p/1")
    assert not scope.allows("http://site9.crawl.test:8080/private/1")
    assert not scope.allows("http://evil.example/")
    assert not scope.allows("http://notcrawl.test/")
    only = Scope.build(["http://a.test/"], allowed_domains=("a.test",), allow_regex=(r"/keep",))
    assert only.allows("http://www.a.test/keep/1") and not only.allows("http://www.a.test/drop")


def test_trap_rules() -> None:
    rules = TrapRules(max_url_length=60, max_path_depth=4, max_repeated_segments=2)
    assert trap_reason("http://a.test/p/1", rules) == ""
    assert trap_reason("http://a.test/" + "x" * 80, rules) == "url_too_long"
    assert trap_reason("http://a.test/a/b/c/d/e", rules) == "path_too_deep"
    assert trap_reason("http://a.test/a/x/a/a", rules) == "repeated_segments"


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("http://a.test/a//b/./c", "http://a.test/a//b/c"),  # RFC 3986: empty segments are kept
        ("http://a.test/a//b", "http://a.test/a//b"),
        ("http://a.test:0/", None),
        ("http://a.test/%7e%2fx", "http://a.test/~%2Fx"),  # unreserved unescaped, hex upper-cased
        ("http://2130706433/", "http://127.0.0.1/"),  # numeric hosts as browsers read them
        ("http://0x7f.1/x", "http://127.0.0.1/x"),
        ("http://a.test/a/b/../../..", "http://a.test/"),
    ],
)
def test_normalize_rfc3986_details(raw: str, want: str | None) -> None:
    assert normalize(raw) == want


def test_ipv6_seed_is_in_its_own_scope() -> None:
    assert Scope.build(["http://[::1]:8080/"]).allows("http://[::1]:8080/x")


def _canonical_by_one_regex(url: str) -> bool:
    """is_canonical's definition as one regex (its first version, ~3x slower): the oracle."""
    from pipeline.urls import _CANONICAL

    m = _CANONICAL.fullmatch(url)
    if m is None or "/." in url or "%" in url or len(url) > 8192:
        return False
    port = m.group(3)
    if port is not None and not (0 < int(port) <= 65535 and int(port) != {"http": 80, "https": 443}[m.group(1)]):
        return False
    return not m.group(2).isdigit()


_PIECES = st.sampled_from(
    [*"aZ09-._~!$&'()*+,;=:@/?%#[]\\ \x00é", "http://", "https://", "HTTP://", ":80", ":443", ":0", ":65536",
     ":8080", "..", "/.", "site", "1.2.3.4", "xn--", "-a", "a-", "_"]
)  # fmt: skip


@settings(max_examples=3000)
@given(
    st.one_of(
        st.from_regex(r"https?://[a-z0-9.\-_]{1,20}(:[0-9]{1,6})?/[A-Za-z0-9\-._~!$&'()*+,;=:@/?%#]{0,20}", fullmatch=True),
        st.lists(_PIECES, max_size=15).map("".join),
    )
)
def test_is_canonical_matches_its_one_regex_definition(url: str) -> None:
    assert is_canonical(url) == _canonical_by_one_regex(url)
