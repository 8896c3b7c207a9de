"""Link extraction from one fetched page: HTML bytes in, absolute normalized links out.

Hot path: the embedded crawl and the mrjob mapper call ``extract`` once per fetched page, so it is
tuned for the common case (~20 KB UTF-8 page, ~20 links):

* the body is handed to lexbor (selectolax) as bytes when it is UTF-8 or ASCII, decoded only when
  it is not (``_decoded``: HTTP charset, valid UTF-8, ``<meta charset>``, windows-1252);
* one CSS pass finds ``<meta name=robots>`` and ``<base href>``, one more the links;
* identical hrefs on one page are resolved once, and each distinct href goes to
  ``pipeline.links.hrefs`` (href text to canonical URL and fingerprint, with all the fast paths).

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

from pipeline.links.hrefs import Resolver, canonical

DEFAULT_MAX_LINKS = 10_000
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_ANCHOR = 200


_CHARSET_RE = re.compile(rb"""<meta[^>]{0,512}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]{1,40})""", re.I)
_HEADER_CHARSET_RE = re.compile(r"""charset\s*=\s*["']?([A-Za-z0-9_.:\-]+)""", re.I)
# WHATWG maps these labels to windows-1252; Python's latin-1 would leave 0x80-0x9F as C1 controls.
_WHATWG_ALIASES = {"iso-8859-1": "cp1252", "iso8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252",
                   "us-ascii": "cp1252", "ascii": "cp1252", "l1": "cp1252"}
_UTF8_NAMES = frozenset({"utf-8", "utf8", "utf_8", "unicode-1-1-utf-8"})


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


def parse_tree(body: bytes, content_type: str = "text/html", *, max_bytes: int = DEFAULT_MAX_BYTES) -> LexborHTMLParser:
    """The page's lexbor tree, decoded as ``extract`` decodes it (for a caller that also reads the tree:
    ``pipeline.plugins.prepare``). May raise on junk, unlike ``extract``."""
    return LexborHTMLParser(_decoded(body[:max_bytes], content_type))


def extract_tree(
    tree: LexborHTMLParser, *, base_url: str, max_links: int = DEFAULT_MAX_LINKS, max_anchor: int = DEFAULT_MAX_ANCHOR
) -> ExtractedPage:
    """``extract`` of a page already parsed with ``parse_tree``. Never raises."""
    page = ExtractedPage()
    with contextlib.suppress(Exception):
        _links_of(page, tree, base_url, max_links, max_anchor)
    return page


def decoded_text(body: bytes, content_type: str = "") -> str:
    """The body as text, by the charset rules ``extract`` parses with."""
    got = _decoded(body, content_type)
    return got.decode("utf-8", "replace") if isinstance(got, bytes) else got


def _extract_into(
    page: ExtractedPage, body: bytes, base_url: str, content_type: str, max_links: int, max_anchor: int
) -> None:
    _links_of(page, LexborHTMLParser(_decoded(body, content_type)), base_url, max_links, max_anchor)


def followed_links(
    body: bytes, *, base_url: str, content_type: str = "text/html", max_links: int = DEFAULT_MAX_LINKS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[tuple[str, int]]:
    """``pipeline.links.filtering.followed(extract(...))`` in one pass, without a ``Link`` per anchor: the
    ``(url, url_id)`` of the page's followable links, first occurrences in document order, none on a
    meta-nofollow page, a rel=nofollow link only where the same URL also appears plainly (what a parse
    process hands the crawl for every page: ~15 us a page less). tests/unit/test_links_props.py holds it
    to the two-step answer. Never raises."""
    out: list[tuple[str, int]] = []
    if not body or (content_type and "html" not in content_type.lower()):
        return out
    with contextlib.suppress(Exception):
        tree = LexborHTMLParser(_decoded(body[:max_bytes], content_type))
        page = ExtractedPage()
        resolver = _head_of(page, tree, base_url)
        if page.meta_nofollow:
            return out
        seen: set[str] = set()
        cache: dict[str, tuple[str, int] | None] = {}
        resolved = 0
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
            if resolved >= max_links:
                break
            resolved += 1
            rel = attrs.get("rel")
            if rel and "nofollow" in rel.lower().split():
                continue
            if target[0] not in seen:
                seen.add(target[0])
                out.append(target)
    return out


def _head_of(page: ExtractedPage, tree: LexborHTMLParser, base_url: str) -> Resolver:
    """Fill ``page``'s meta robots and ``<base href>``; the resolver its links resolve with."""
    resolver = Resolver(canonical(base_url) or "")
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
    return Resolver(page.base_href) if page.base_href else resolver


def _links_of(page: ExtractedPage, tree: LexborHTMLParser, base_url: str, max_links: int, max_anchor: int) -> None:
    resolver = _head_of(page, tree, base_url)
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
