"""pipeline.links.hrefs.cheap_canonical: whenever it answers, it answers exactly what normalize answers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.links.hrefs import cheap_canonical
from pipeline.urls import normalize

PIECES = st.sampled_from(
    ["/", "./", "../", "/./", "/.", ".", "a", "B", "p", "1", "?", "q=1", "&", "#", "#sec", "%41", "%zz", "\x00",
     " ", "\t", "@", ":", ":80", ":8080", ":0", "é", "//", "\\", ";", "~", "-"]
)
PREFIXES = st.sampled_from(
    ["http://site0.crawl.test:8080", "HTTP://SITE0.CRAWL.TEST:8080", "http://Site.Test", "https://h.test:443",
     "http://user@h.test", "http://127.0.0.1", "http://[::1]:9", "http://h.test.", "http://exämple.test",
     "ftp://h.test", "http://", "http:/h.test", " http://h.test", "https://xn--bcher-kva.test"]
)


@settings(max_examples=3000, deadline=None)
@given(PREFIXES, st.lists(PIECES, max_size=10).map("".join))
def test_agrees_with_normalize_whenever_it_answers(prefix: str, rest: str) -> None:
    url = prefix + rest
    cheap = cheap_canonical(url)
    if cheap is not None:
        assert cheap == normalize(url), url


def test_the_shapes_it_exists_for() -> None:
    assert cheap_canonical("http://site0.crawl.test:8080/./p/589") == "http://site0.crawl.test:8080/p/589"
    assert cheap_canonical("http://SITE0.CRAWL.TEST:8080/p/255") == "http://site0.crawl.test:8080/p/255"
    assert cheap_canonical("http://site0.crawl.test:8080/./p/60#sec") == "http://site0.crawl.test:8080/p/60"
    # '/./' in a query is not a dot segment: never rewritten (here the conservative check declines).
    assert cheap_canonical("http://h.test/a?x=/./") in (None, normalize("http://h.test/a?x=/./"))
    assert cheap_canonical("http://h.test/a/../b") is None  # left to normalize
    assert cheap_canonical("http://h.test/a#\x00") is None  # normalize refuses a NUL anywhere
