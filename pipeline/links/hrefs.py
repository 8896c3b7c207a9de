"""Href text in, canonical URL and its fingerprint out: every fast path of link resolution in one place.

The crawl resolves about twenty hrefs per fetched page, and almost all take one of four shapes
(absolute, protocol-relative, root-relative, plain relative) that resolve with a few string
operations. In the order a link meets them:

1. ``Resolver.resolve_id``: a memo across pages keyed by what the answer depends on (a site's
   navigation repeats on every page);
2. ``Resolver._resolve``: the four common shapes by string operations, RFC 3986 ``join`` for the rest;
3. ``canonical``: is the result already canonical (``pipeline.urls.is_canonical``, ~0.4 us)? Is it one
   fragment, upper-case authority or ``/./`` away (``cheap_canonical``, ~1 us)? Only then the full
   ``pipeline.urls.normalize`` (~2.3 us), memoised.

Each step answers exactly what ``normalize(join(base, href))`` would (property-tested in
tests/unit/test_urls_cheap.py and tests/unit/test_links_props.py); the slow paths in ``pipeline.urls``
are the definition, this module only avoids reaching them. ``is_canonical`` stays in ``pipeline.urls``
because ``normalize`` itself begins with it.
"""

from __future__ import annotations

import functools
import re

from pipeline.urls import fingerprint, is_canonical, join, normalize

_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_TAB_NL = re.compile(r"[\t\n\r]")

# normalize() is pure, so memoising it is safe; bounded so memory stays flat on long crawls.
_normalize_cached = functools.lru_cache(maxsize=32768)(normalize)


def cheap_canonical(url: str, *, max_length: int = 8192) -> str | None:
    """``normalize(url)`` when at most a fragment, an upper-case authority and ``/./`` path segments
    stand between ``url`` and its canonical form; None when the slow path must decide (or when none of
    these applies: callers try ``is_canonical`` first, and it is not repeated here).

    These are the shapes links take most often after resolution (``./page``, ``#top``, ``HTTP://Host``),
    and each costs a slow ``normalize`` (~2.3 us) where this costs ~1 us. Property-tested against
    ``normalize`` in tests/unit/test_urls_cheap.py.
    """
    if len(url) > max_length or "\x00" in url:  # normalize refuses these whole, fragment included
        return None
    original = url
    hash_at = url.find("#")
    if hash_at >= 0:
        url = url[:hash_at]
    start = url.find("//") + 2
    end = url.find("/", start)
    if start < 2 or end < 0:
        return None
    authority = url[start:end]
    if not authority.islower() and authority.isascii() and "@" not in authority:
        url = url[:start].lower() + authority.lower() + url[end:]
    if "/./" in url:
        query_at = url.find("?")
        path_end = len(url) if query_at < 0 else query_at
        url = url[:end] + url[end:path_end].replace("/./", "/") + url[path_end:]
    if url == original:  # nothing cut or folded: whether it is canonical is is_canonical's answer
        return None
    return url if is_canonical(url, max_length=max_length) else None


def canonical(url: str) -> str | None:
    """``pipeline.urls.normalize(url)``, by the cheapest route that gives its answer: the canonical
    shape test, then ``cheap_canonical``, then the memoised slow path."""
    if is_canonical(url):
        return url
    cheap = cheap_canonical(url)
    return cheap if cheap is not None else _normalize_cached(url)


_MISS = object()
# (directory or page, href) -> (url, fingerprint) | None, in two generations of up to _MEMO_HALF
# entries: when the young one fills, it becomes the old one and the old one is dropped. An entry used
# again while old is moved back to the young one, so a site's navigation outlives any amount of
# one-off links (a clear-all reset would drop it with them).
_MEMO: dict[tuple[str, str], object] = {}
_MEMO_OLD: dict[tuple[str, str], object] = {}
_MEMO_HALF = 100_000


class Resolver:
    """Resolves hrefs against one base URL; fast paths for the common shapes, urljoin for the rest."""

    __slots__ = ("base", "scheme", "origin", "directory", "no_query")

    def __init__(self, base: str) -> None:
        self.base = base  # normalized, or '' when the page URL was unusable (only absolute links work)
        if base:
            self.scheme = base[: base.index(":")]
            path_start = base.index("/", base.index("//") + 2)
            query = base.find("?")
            end = len(base) if query < 0 else query
            self.origin = base[:path_start]
            self.no_query = base[:end]
            self.directory = base[: base.rindex("/", 0, end) + 1]
        else:
            self.scheme = self.origin = self.no_query = self.directory = ""

    def resolve(self, href: str) -> str | None:
        """Absolute normalized http(s) URL for ``href``, or None (other schemes, junk, fragments)."""
        target = self.resolve_id(href)
        return None if target is None else target[0]

    def resolve_id(self, href: str) -> tuple[str, int] | None:
        """``(url, fingerprint(url))`` for ``href``, or None where ``resolve`` gives None.

        Memoised across pages, keyed by what the answer depends on: an absolute http(s) href by
        itself, a root-relative one by the origin, a '?'-only one by the page path, any other by the
        directory. A site's navigation links repeat on every page, and the same absolute or
        root-relative link from pages in different directories shares one entry. The fingerprint
        rides along because the crawl's seen-check needs it for every link.
        """
        first = href[:1]
        if first == "/":
            key = (self.origin, href)
        elif first == "h" and href.startswith(("http://", "https://")):
            key = ("", href)
        else:
            key = (self.no_query if first == "?" else self.directory, href)
        out = _MEMO.get(key, _MISS)
        if out is _MISS:
            out = _MEMO_OLD.pop(key, _MISS)
            if out is _MISS:
                url = self._resolve(href)
                out = None if url is None else (url, fingerprint(url))
            if len(_MEMO) >= _MEMO_HALF:  # the young generation becomes the old one
                _MEMO_OLD.clear()
                _MEMO_OLD.update(_MEMO)
                _MEMO.clear()
            _MEMO[key] = out
        return out  # type: ignore[return-value]

    def _resolve(self, href: str) -> str | None:
        href = href.strip()
        if "\t" in href or "\n" in href or "\r" in href:  # the URL parser drops these anywhere
            href = _TAB_NL.sub("", href)
        if "\\" in href:  # browsers read a backslash as a slash in http(s) URLs
            href = href.replace("\\", "/")
        hash_at = href.find("#")
        # No fragment survives normalization: cut it here so that the fast paths see more links. Not
        # after whitespace (which the slow path percent-encodes) nor with a NUL (which it refuses).
        if hash_at > 0 and not href[hash_at - 1].isspace() and "\x00" not in href:
            href = href[:hash_at]
        if href.startswith(("http://", "https://")):  # the most common shape: already absolute
            return canonical(href)
        if not href or href[0] == "#":
            return None  # empty or fragment-only: the page itself
        first = href[0]
        if first == "/":
            if href.startswith("//"):
                return canonical(f"{self.scheme}:{href}") if self.scheme else canonical(f"http:{href}")
            return canonical(self.origin + href) if self.base else None
        colon = href.find(":")
        if colon > 0 and _looks_like_scheme(href, colon):
            scheme = href[:colon].lower()
            if scheme not in ("http", "https"):
                return None  # javascript:, mailto:, data:, tel:, ftp:, ...
            if href[colon + 1 : colon + 3] == "//":
                return canonical(href)
            return canonical(join(self.base, href)) if self.base else None  # 'http:path' oddity
        if not self.base:
            return None
        if first == "?":
            return canonical(self.no_query + href)
        # Plain relative path: normalize() removes dot segments, so concatenation equals RFC 3986 join
        # ('./x' is 'x' in the same directory: dropped here, it keeps the URL on the canonical fast path).
        while href.startswith("./"):
            href = href[2:]
        if href.startswith("../"):
            # '../x' is 'x' one directory up (never above the root: RFC 3986 drops the excess), which
            # keeps a common shape off normalize()'s slow path as well.
            directory, root = self.directory, len(self.origin) + 1
            while href.startswith("../"):
                href = href[3:]
                if len(directory) > root:
                    directory = directory[: directory.rindex("/", 0, len(directory) - 1) + 1]
            return canonical(directory + href)
        return canonical(self.directory + href)


def _looks_like_scheme(href: str, colon: int) -> bool:
    """True when ``href[:colon]`` is a URL scheme (letter, then letters, digits, '+', '-', '.')."""
    if not href[0].isascii() or not href[0].isalpha():
        return False
    return all(c in _SCHEME_CHARS for c in href[1:colon])
