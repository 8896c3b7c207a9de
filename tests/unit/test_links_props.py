"""Property tests: extract never raises, its fast paths agree with the slow reference."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.links import hrefs as href_mod
from pipeline.links.extract import extract
from pipeline.urls import _CANONICAL, fingerprint, join, normalize

HREF_CHARS = st.sampled_from(list("abc/.?#:%&=;@+ -_~\\\t") + ["..", "//", "http:", "https://", "\u00e9", "%2"])
hrefs = st.lists(HREF_CHARS, max_size=12).map("".join)
bases = st.sampled_from(
    [
        "https://www.example.com/dir/page.html?x=1",
        "http://h.test/",
        "http://127.0.0.1:8080/a/b/",
        "https://example.org",
        "http://[::1]:9/x",
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000), st.text(max_size=40), st.text(max_size=40))
def test_extract_never_raises_on_junk(body: bytes, base: str, content_type: str) -> None:
    page = extract(body, base_url=base, content_type=content_type or "text/html")
    for link in page.links:
        assert normalize(link.url) == link.url


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["<a href='", "'>", "</a>", "<base href='", "<meta name=robots content='",
                                 "nofollow", "x", "/", "&amp;", "<", ">", '"', "\u00e9", "\x00"]), max_size=40))
def test_extract_never_raises_on_tag_soup(parts: list[str]) -> None:
    extract("".join(parts).encode("utf-8", "surrogatepass"), base_url="http://h.test/")


@settings(max_examples=500)
@given(bases, hrefs)
def test_fast_resolver_matches_urljoin_then_normalize(base: str, href: str) -> None:
    """The string fast paths give what the reference (urls.join + urls.normalize) gives.

    Places where Python's urljoin departs from RFC 3986 (and browsers) are left out: it keeps the
    base query for a bare '?' and drops an empty query or fragment, it collapses empty path segments
    ('a//b' -> 'a/b'), and it reads ';' as RFC 1808 parameters (dropping empty ones).
    """
    nbase = normalize(base)
    assert nbase is not None
    clean = href.strip().replace("\t", "").replace("\\", "/")
    got = href_mod.Resolver(nbase).resolve(href)
    if not clean or clean.startswith("#"):
        assert got is None
        return
    no_frag = clean.split("#", 1)[0]
    stem = clean.rstrip("?#")
    if stem != stem.rstrip():  # whitespace before an empty '?'/'#': urljoin drops them, then strips
        return
    if no_frag.endswith("?") or ";" in clean or "//" in clean.split("?", 1)[0].split("#", 1)[0].lstrip("/"):
        return
    expected = normalize(join(nbase, clean))
    if clean.startswith("//"):
        expected = normalize(nbase.split(":", 1)[0] + ":" + clean)
    assert got == expected


@given(bases, st.lists(hrefs, max_size=8))
def test_every_link_carries_its_fingerprint(base: str, hs: list[str]) -> None:
    """The memoised fingerprint is the fingerprint of the URL it rides with, also for memo hits."""
    body = "".join(f"<a href='{h.replace(chr(39), '')}'>x</a>" for h in hs).encode()
    for _ in range(2):  # the second pass answers from the memo
        for link in extract(body, base_url=base).links:
            assert link.url_id == fingerprint(link.url)


CANONICAL_ISH = st.from_regex(_CANONICAL, fullmatch=True)


@settings(max_examples=1000)
@given(CANONICAL_ISH)
def test_canonical_fast_path_is_a_fixed_point_of_normalize(url: str) -> None:
    assert href_mod.canonical(url) == normalize(url)


# No base with an empty path segment: urljoin collapses those, RFC 3986 (and the resolver) keeps them.
DEEP_BASES = st.sampled_from(["http://h.test/", "http://h.test/a/", "http://h.test/a/b/c.html",
                              "https://h.test:8443/a/b/?q=1", "http://h.test/a/b/c/"])  # fmt: skip
UP_HREFS = st.tuples(st.lists(st.sampled_from(["../", "./"]), min_size=1, max_size=6),
                     st.lists(st.sampled_from(["x", "y/", "..", ".", "../", "z.html", "?q", "#f", "%7e"]), max_size=4))  # fmt: skip


@settings(max_examples=500)
@given(DEEP_BASES, UP_HREFS)
def test_parent_directory_hrefs_resolve_as_rfc3986_says(base: str, parts: tuple[list[str], list[str]]) -> None:
    """'../' runs (the resolver's own fast path) land where urljoin + normalize put them, at the root too."""
    href = "".join(parts[0]) + "".join(parts[1])
    if href.split("#", 1)[0].endswith("?"):
        return  # urljoin keeps the base query for a bare '?' (see above)
    got = href_mod.Resolver(base).resolve(href)
    assert got == normalize(join(base, href))


SOUP = st.lists(st.sampled_from(["<a href='", "<area href='", "'>", "</a>", "<base href='", "<meta name=robots content='",
                                 "<meta name=ROBOTS content='none", "nofollow", "' rel='nofollow", "' rel='NoFollow x",
                                 "x", "../y", "/z", "#f", "//h.test/w", "http://o.test/", "mailto:a@b", "&amp;",
                                 "<", ">", '"', "\u00e9", "\t", "?q=1"]), max_size=60)  # fmt: skip


@settings(max_examples=400)
@given(SOUP, bases, st.sampled_from([2, 10_000]))
def test_followed_links_in_one_pass_is_followed_of_extract(parts: list[str], base: str, max_links: int) -> None:
    """What a parse process hands back (``extract.followed_links``) is ``filtering.followed`` of ``extract``."""
    from pipeline.links.extract import followed_links
    from pipeline.links.filtering import followed

    body = "".join(parts).encode("utf-8", "surrogatepass")
    page = extract(body, base_url=base, max_anchor=0, max_links=max_links)
    assert followed_links(body, base_url=base, max_links=max_links) == followed(page)
