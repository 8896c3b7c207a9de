"""Link extraction from one fetched page: HTML bytes in, absolute normalized links out.

Hot path: the embedded crawl engine calls ``extract`` once per fetched page and the MapReduce mapper
calls the same function, so it is tuned for the common case (~20 KB UTF-8 page, ~20 links):

* selectolax's lexbor backend parses the bytes directly (the modest backend, ``HTMLParser``, was
  removed in selectolax 1.0; lexbor is the only engine left);
* ``href`` values are resolved with a few string operations for the four common shapes (absolute,
  protocol-relative, root-relative, plain relative) and only unusual ones go to ``pipeline.urls.join``;
* identical hrefs on one page are resolved once, and ``normalize`` results are memoised per process
  (bounded LRU) because navigation links repeat on every page of a site.

Contract: ``extract`` never raises. Broken markup, junk bytes, huge pages or a bad base URL give
fewer links (possibly none), never an exception.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import re
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

from pipeline.urls import _CANONICAL, cheap_canonical, fingerprint, is_canonical, join, normalize  # noqa: F401 (re-exported for tests)

DEFAULT_MAX_LINKS = 10_000
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_ANCHOR = 200

# normalize() is pure, so memoising it is safe; bounded so memory stays flat on long crawls.
_normalize_cached = functools.lru_cache(maxsize=32768)(normalize)

_CHARSET_RE = re.compile(rb"""<meta[^>]{0,512}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]{1,40})""", re.I)
_HEADER_CHARSET_RE = re.compile(r"""charset\s*=\s*["']?([A-Za-z0-9_.:\-]+)""", re.I)
# WHATWG maps these labels to windows-1252; Python's latin-1 would leave 0x80-0x9F as C1 controls.
_WHATWG_ALIASES = {"iso-8859-1": "cp1252", "iso8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252",
                   "us-ascii": "cp1252", "ascii": "cp1252", "l1": "cp1252"}
_UTF8_NAMES = frozenset({"utf-8", "utf8", "utf_8", "unicode-1-1-utf-8"})
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_TAB_NL = re.compile(r"[\t\n\r]")


@dataclass(slots=True)
class Link:
    """One outgoing link: absolute normalized ``url``, whitespace-collapsed ``anchor`` text."""

    url: str
    anchor: str
    nofollow: bool = False
    url_id: int = 0  # ``pipeline.urls.fingerprint(url)``, memoised with the resolution (0: not computed)


@dataclass(slots=True)
class ExtractedPage:
    """What a page says about its links.

    ``links`` keeps document order and duplicates (the filter de-duplicates). ``base_href`` is the
    absolute, normalized ``<base href>`` when the page has a usable one, else ''. ``truncated`` is set
    when ``max_links`` cut the list short.
    """

    links: list[Link] = field(default_factory=list)
    meta_nofollow: bool = False
    meta_noindex: bool = False
    base_href: str = ""
    truncated: bool = False


def extract(
    body: bytes,
    *,
    base_url: str,
    content_type: str = "text/html",
    max_links: int = DEFAULT_MAX_LINKS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_anchor: int = DEFAULT_MAX_ANCHOR,
) -> ExtractedPage:
    """Links of an HTML page fetched from ``base_url`` (the final URL, after redirects).

    Non-HTML content types give an empty page. Bodies beyond ``max_bytes`` are parsed up to that
    length. At most ``max_links`` links are returned. Never raises.
    """
    page = ExtractedPage()
    if not body or (content_type and "html" not in content_type.lower()):
        return page
    # Contract: junk in, fewer links out, never an exception (links found so far are kept).
    with contextlib.suppress(Exception):
        _extract_into(page, body[:max_bytes], base_url, content_type, max_links, max_anchor)
    return page


def _extract_into(
    page: ExtractedPage, body: bytes, base_url: str, content_type: str, max_links: int, max_anchor: int
) -> None:
    tree = LexborHTMLParser(_decoded(body, content_type))
    resolver = _Resolver(_normalize(base_url) or "")
    base_seen = False
    for node in tree.css("meta[name], base[href]"):  # one pass over the tree for both
        attrs = node.attributes
        if node.tag == "base":
            if not base_seen:  # only the first <base href> counts (HTML standard)
                base_seen = True
                resolved = resolver.resolve(attrs.get("href") or "")
                if resolved:
                    page.base_href = resolved
            continue
        if (attrs.get("name") or "").strip().lower() != "robots":
            continue
        tokens = {t.strip() for t in (attrs.get("content") or "").lower().split(",")}
        page.meta_nofollow |= "nofollow" in tokens or "none" in tokens
        page.meta_noindex |= "noindex" in tokens or "none" in tokens
    if page.base_href:
        resolver = _Resolver(page.base_href)

    links = page.links
    cache: dict[str, tuple[str, int] | None] = {}  # identical hrefs on one page resolve once
    for node in tree.css("a[href], area[href]"):
        attrs = node.attributes
        href = attrs.get("href")
        if not href:
            continue
        if href in cache:
            target = cache[href]
        else:
            target = cache[href] = resolver.resolve_id(href)
        if target is None:
            continue
        if len(links) >= max_links:
            page.truncated = True  # a further link exists beyond the cap
            break
        rel = attrs.get("rel")
        nofollow = bool(rel) and "nofollow" in rel.lower().split()  # type: ignore[union-attr]
        links.append(Link(target[0], _anchor(node, max_anchor) if max_anchor > 0 else "", nofollow, target[1]))


def _anchor(node: object, max_anchor: int) -> str:
    text: str = node.text(deep=True, separator=" ", strip=True)  # type: ignore[attr-defined]
    if not text:
        img = node.css_first("img[alt]")  # type: ignore[attr-defined]
        text = (img.attributes.get("alt") or "").strip() if img is not None else ""
        if not text:
            return ""
    if "  " in text or "\n" in text or "\t" in text or "\xa0" in text:
        text = " ".join(text.split())
    return text[:max_anchor]


def _decoded(body: bytes, content_type: str) -> bytes | str:
    """The body as lexbor should see it: UTF-8 bytes as they are, anything else decoded to str.

    Order follows the HTML standard in spirit: HTTP charset, then valid UTF-8, then ``<meta charset>``
    in the first 1024 bytes, then windows-1252 (a browser's fallback) so latin-1 pages keep their links.
    """
    header = _HEADER_CHARSET_RE.search(content_type) if "charset" in content_type.lower() else None
    if header is not None:
        codec = _codec(header.group(1))
        if codec == "utf-8":
            return body
        if codec is not None:
            return body.decode(codec, errors="replace")
    if body.isascii():
        return body
    try:
        body.decode("utf-8")
        return body
    except UnicodeDecodeError:
        pass
    meta = _CHARSET_RE.search(body, 0, 1024)
    codec = _codec(meta.group(1).decode("ascii", "replace")) if meta is not None else None
    if codec is None or codec == "utf-8":  # a page that lies about UTF-8 is really legacy-encoded
        codec = "cp1252"
    return body.decode(codec, errors="replace")


@functools.lru_cache(maxsize=256)
def _codec(label: str) -> str | None:
    """Python codec for a charset label, 'utf-8' for UTF-8, or None when unknown or not a text codec."""
    label = label.strip().lower()
    if label in _UTF8_NAMES:
        return "utf-8"
    label = _WHATWG_ALIASES.get(label, label)
    try:
        info = codecs.lookup(label)
    except LookupError:
        return None
    if not getattr(info, "_is_text_encoding", True):  # base64, rot13, ... cannot decode a page
        return None
    return "utf-8" if info.name == "utf-8" else info.name


def _normalize(url: str) -> str | None:
    """``pipeline.urls.normalize`` with its canonical fast paths first, then a memo for the rest."""
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


class _Resolver:
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
            return _normalize(href)
        if not href or href[0] == "#":
            return None  # empty or fragment-only: the page itself
        first = href[0]
        if first == "/":
            if href.startswith("//"):
                return _normalize(f"{self.scheme}:{href}") if self.scheme else _normalize(f"http:{href}")
            return _normalize(self.origin + href) if self.base else None
        colon = href.find(":")
        if colon > 0 and _looks_like_scheme(href, colon):
            scheme = href[:colon].lower()
            if scheme not in ("http", "https"):
                return None  # javascript:, mailto:, data:, tel:, ftp:, ...
            if href[colon + 1 : colon + 3] == "//":
                return _normalize(href)
            return _normalize(join(self.base, href)) if self.base else None  # 'http:path' oddity
        if not self.base:
            return None
        if first == "?":
            return _normalize(self.no_query + href)
        # Plain relative path: normalize() removes dot segments, so concatenation equals RFC 3986 join
        # ('./x' is 'x' in the same directory: dropped here, it keeps the URL on the canonical fast path).
        while href.startswith("./"):
            href = href[2:]
        return _normalize(self.directory + href)


def _looks_like_scheme(href: str, colon: int) -> bool:
    """True when ``href[:colon]`` is a URL scheme (letter, then letters, digits, '+', '-', '.')."""
    if not href[0].isascii() or not href[0].isalpha():
        return False
    return all(c in _SCHEME_CHARS for c in href[1:colon])
