"""Sitemaps (sitemaps.org 0.9) as pure functions of bytes: what a sitemap file lists, safely (issue #23).

Stable interface (the recrawl work drives it; the fetching is the caller's):

- ``robots_sitemaps(robots_txt, *, limit=...) -> list[str]``: the ``Sitemap:`` URLs of a robots.txt (protego),
  normalized, http(s) only, deduplicated, at most ``limit``.
- ``parse_sitemap(data, *, url, limits=SitemapLimits(), in_scope=None) -> SitemapFile``: one file's
  bytes as fetched (gzip is detected by its magic bytes and inflated here, as ``.xml.gz`` files come
  without Content-Encoding) to its page entries (``kind == "urlset"``, or a text sitemap: one URL a
  line) or child sitemaps (``kind == "index"``). Never raises on content: a hostile file gives
  ``error`` (one of ``ERRORS``) and keeps what was read before the problem.
- ``SitemapWalk``: the per-site walk state: ``add_roots(urls)``, ``next_file()`` -> (url, depth) to
  fetch, ``fed(url, SitemapFile)`` / ``failed(url, error)``; it refuses loops, indexes deeper than
  ``limits.max_depth`` and more than ``limits.max_files`` files, each as a recorded per-file error.

Limits (``SitemapLimits``): the protocol's 50,000 URLs and 50 MB (52,428,800 bytes) *uncompressed* per
file; index depth 2 (an index may list indexes once, which the protocol forbids but sites do);
``max_loc_chars`` 2,048 (the protocol's URL limit). A file over a limit (or with bad XML) keeps the
entries before the problem, unless ``keep_partial=False``.

Safety: pyexpat with every DTD refused (no entity can be declared, so no expansion, no external
fetch) -- the rule defusedxml applies, without its package (installed here only as another tool's
dependency). Inflation is bounded by ``max_bytes`` + 1 at every step, so a gzip bomb costs at most that.

Entries: ``loc`` normalized (``pipeline.urls.normalize``), kept only if http(s), absolute, at most
``max_loc_chars`` and ``in_scope(loc)`` (the caller's scope; ``same_site(url)`` gives the protocol's
rule for robots-submitted sitemaps: same scheme, host and port). ``lastmod`` is epoch seconds (W3C
datetime: YYYY, YYYY-MM, YYYY-MM-DD, with time and zone; no zone = UTC) or None when absent/invalid.
"""

from __future__ import annotations

import calendar
import re
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit
from xml.parsers import expat

from protego import Protego

from pipeline.urls import normalize

ERRORS = ("bad_xml", "bad_gzip", "over_size", "over_count", "not_sitemap", "depth", "loop", "too_many_files")
_CHUNK = 256 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_FIELDS = frozenset({"loc", "lastmod", "changefreq", "priority"})


@dataclass(frozen=True, slots=True)
class SitemapLimits:
    max_urls: int = 50_000
    max_bytes: int = 50 * 1024 * 1024
    max_depth: int = 2  # index levels above a urlset: root index (0) -> index (1) -> urlset (2)
    max_files: int = 1_000  # per walk (one site)
    max_loc_chars: int = 2_048
    # Keep the entries read before a limit or an XML error (True, as lenient readers do) or drop the
    # whole file (False: a file over the protocol's limits is invalid, and 50,000 URLs is a lot to admit).
    keep_partial: bool = True


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    loc: str
    lastmod: float | None = None
    changefreq: str | None = None
    priority: float | None = None


@dataclass(slots=True)
class SitemapFile:
    """One parsed file: ``kind`` is "urlset", "index", "text" or "" (unknown, with an error)."""

    url: str
    kind: str = ""
    entries: list[SitemapEntry] = field(default_factory=list)  # pages (urlset, text)
    sitemaps: list[SitemapEntry] = field(default_factory=list)  # child sitemaps (index)
    error: str | None = None
    detail: str = ""
    off_scope: int = 0  # locs dropped by in_scope
    invalid: int = 0  # locs dropped as not absolute http(s), too long or unparsable
    bytes_read: int = 0  # uncompressed bytes parsed


class _Stop(Exception):
    """Ends parsing early: a limit was reached or a DTD was met (``error`` names which)."""

    def __init__(self, error: str, detail: str) -> None:
        super().__init__(detail)
        self.error, self.detail = error, detail


def same_site(sitemap_url: str) -> Callable[[str], bool]:
    """The protocol's scope for a sitemap named in robots.txt: URLs of the same scheme, host and port."""
    origin = _origin(sitemap_url)
    return lambda loc: _origin(loc) == origin


def _origin(url: str) -> tuple[str, str, int | None] | None:
    try:
        p = urlsplit(url)
        return (p.scheme, (p.hostname or "").lower(), p.port)
    except ValueError:
        return None


def robots_sitemaps(robots_txt: str, *, limit: int = 100) -> list[str]:
    try:
        found: list[str] = list(Protego.parse(robots_txt).sitemaps)
    except Exception:  # noqa: BLE001 - protego on hostile text: no sitemaps rather than a crash
        return []
    return sitemap_urls(found, limit=limit)


def sitemap_urls(raw: Iterable[str], *, limit: int = 100) -> list[str]:
    """``Sitemap:`` values as normalised absolute http(s) URLs, each once, at most ``limit``."""
    out: list[str] = []
    for text in raw:
        url = _absolute(text.strip(), 8192)
        if url is not None and url not in out:
            out.append(url)
            if len(out) >= limit:
                break
    return out


_XML_TYPES = frozenset({"application/xml", "text/xml", "application/gzip", "application/x-gzip"})


def is_sitemap_like(url: str, content_type: str) -> bool:
    """A URL the crawl reads as robots.txt or a sitemap file, by path and type (the body decides later):
    what both crawl scales re-fetch on the sitemap files' own schedule (``recrawl.sitemap_interval_s``)."""
    path = ("/" + url.partition("://")[2].partition("/")[2].partition("?")[0]).lower()
    if path == "/robots.txt":
        return True
    ctype = content_type.split(";")[0].strip().lower()
    return ctype in _XML_TYPES or ("sitemap" in path and ctype in ("text/plain", "application/octet-stream"))


def _absolute(loc: str, max_chars: int) -> str | None:
    if len(loc) > max_chars or not loc.lower().startswith(("http://", "https://")):
        return None
    url = normalize(loc)
    return url if url is not None and len(url) <= max_chars else None


_W3C = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")


def parse_lastmod(text: str) -> float | None:
    """W3C datetime -> epoch seconds (UTC), or None."""
    text = text.strip()
    if not text or len(text) > 64:
        return None
    m = _W3C.fullmatch(text)
    try:
        if m is not None:
            y, mo, d = int(m[1]), int(m[2] or 1), int(m[3] or 1)
            return float(calendar.timegm(datetime(y, mo, d, tzinfo=UTC).timetuple()))
        dt = datetime.fromisoformat(text.replace("z", "Z"))
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _inflate(data: bytes, max_bytes: int) -> Iterator[bytes]:
    """Chunks of the uncompressed stream, stopping after max_bytes + 1 (the caller sees the excess)."""
    if not data.startswith(_GZIP_MAGIC):
        yield data[: max_bytes + 1]
        return
    d = zlib.decompressobj(wbits=47)
    produced = 0
    pending = data
    while pending and produced <= max_bytes:
        chunk = d.decompress(pending, min(_CHUNK, max_bytes + 1 - produced))
        pending = d.unconsumed_tail
        produced += len(chunk)
        if chunk:
            yield chunk
        elif d.eof or not pending:
            break
    if produced <= max_bytes and not d.eof:
        raise _Stop("bad_gzip", "truncated or corrupt gzip stream")


def parse_sitemap(
    data: bytes,
    *,
    url: str,
    limits: SitemapLimits = SitemapLimits(),
    in_scope: Callable[[str], bool] | None = None,
) -> SitemapFile:
    out = SitemapFile(url)
    try:
        chunks = _inflate(data, limits.max_bytes)
        first = next(chunks, b"")
        head = first.lstrip(b"\xef\xbb\xbf \t\r\n")[:4].lower()
        if head == b"http":  # a text sitemap starts with a URL; anything else is XML or junk
            _parse_text(_prepend(first, chunks), out, limits, in_scope)
        else:
            _parse_xml(_prepend(first, chunks), out, limits, in_scope)
    except _Stop as stop:
        out.error, out.detail = stop.error, stop.detail
    except zlib.error as exc:
        out.error, out.detail = "bad_gzip", str(exc)[:200]
    if out.error is not None and not limits.keep_partial:
        out.entries, out.sitemaps = [], []
    return out


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _within(out: SitemapFile, chunks: Iterator[bytes], limits: SitemapLimits) -> Iterator[bytes]:
    """The chunks up to ``max_bytes`` in all; past it, ``over_size`` once the part within was parsed."""
    for chunk in chunks:
        room = limits.max_bytes - out.bytes_read
        out.bytes_read += min(room, len(chunk))
        yield chunk[:room] if len(chunk) > room else chunk
        if len(chunk) > room:
            raise _Stop("over_size", f"more than {limits.max_bytes} bytes uncompressed")


def _add(
    out: SitemapFile, raw: SitemapEntry, limits: SitemapLimits, in_scope: Callable[[str], bool] | None
) -> None:
    bucket = out.sitemaps if out.kind == "index" else out.entries
    if len(out.entries) + len(out.sitemaps) + out.off_scope + out.invalid >= limits.max_urls:
        raise _Stop("over_count", f"more than {limits.max_urls} entries")
    loc = _absolute(raw.loc.strip(), limits.max_loc_chars)
    if loc is None:
        out.invalid += 1
        return
    if in_scope is not None and not in_scope(loc):
        out.off_scope += 1
        return
    bucket.append(SitemapEntry(loc, raw.lastmod, raw.changefreq, raw.priority))


def _parse_text(
    chunks: Iterator[bytes], out: SitemapFile, limits: SitemapLimits, in_scope: Callable[[str], bool] | None
) -> None:
    out.kind = "text"
    rest = b""
    for chunk in _within(out, chunks, limits):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        if len(rest) > limits.max_loc_chars * 4:  # a line no URL fits: keep memory bounded
            rest = b"\x00"  # counted invalid when its line ends
        for line in lines:
            _text_line(line, out, limits, in_scope)
    _text_line(rest, out, limits, in_scope)


def _text_line(
    line: bytes, out: SitemapFile, limits: SitemapLimits, in_scope: Callable[[str], bool] | None
) -> None:
    text = line.strip().decode("utf-8", "replace")
    if text:
        _add(out, SitemapEntry(text), limits, in_scope)


def _refuse_dtd(*_args: object) -> None:
    raise _Stop("bad_xml", "DTD refused (entities are never expanded)")


def _parse_xml(
    chunks: Iterator[bytes], out: SitemapFile, limits: SitemapLimits, in_scope: Callable[[str], bool] | None
) -> None:
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.buffer_text = True  # one CharacterData call per text node, not one per chunk boundary
    parser.StartDoctypeDeclHandler = _refuse_dtd
    parser.EntityDeclHandler = _refuse_dtd
    parser.ExternalEntityRefHandler = _refuse_dtd  # type: ignore[assignment]
    depth = 0
    item: dict[str, str] | None = None
    name: str | None = None
    text: list[str] = []

    def start(tag: str, _attrs: object) -> None:
        nonlocal depth, item, name
        local = tag.rpartition(" ")[2]
        depth += 1
        if depth == 1:
            if local not in ("urlset", "sitemapindex"):
                raise _Stop("not_sitemap", f"root element <{local}>")
            out.kind = "urlset" if local == "urlset" else "index"
        elif depth == 2 and local == ("url" if out.kind == "urlset" else "sitemap"):
            item = {}
        elif depth == 3 and item is not None and local in _FIELDS:
            name = local
            text.clear()

    def end(tag: str) -> None:
        nonlocal depth, item, name
        depth -= 1
        if depth == 2 and name is not None and item is not None:
            item[name] = "".join(text)[: limits.max_loc_chars + 1]
            name = None
        elif depth == 1 and item is not None:
            if "loc" in item:
                _add(out, _entry(item), limits, in_scope)
            else:
                out.invalid += 1
            item = None

    def chars(data: str) -> None:
        if name is not None and sum(map(len, text)) <= limits.max_loc_chars:
            text.append(data)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        for chunk in _within(out, chunks, limits):
            parser.Parse(chunk, False)
        parser.Parse(b"", True)
    except expat.ExpatError as exc:
        raise _Stop("bad_xml", str(exc)[:200]) from None
    if not out.kind:
        raise _Stop("not_sitemap", "no root element")


def _entry(item: dict[str, str]) -> SitemapEntry:
    lastmod = parse_lastmod(item["lastmod"]) if "lastmod" in item else None
    freq = item.get("changefreq", "").strip().lower() or None
    try:
        priority: float | None = float(item["priority"]) if "priority" in item else None
    except ValueError:
        priority = None
    if priority is not None and not 0.0 <= priority <= 1.0:
        priority = None
    return SitemapEntry(item["loc"], lastmod, freq, priority)


@dataclass(slots=True)
class SitemapWalk:
    """The sitemap files of one site to fetch, breadth first, with the limits and per-file errors."""

    limits: SitemapLimits = SitemapLimits()
    queue: deque[tuple[str, int]] = field(default_factory=deque)
    seen: set[str] = field(default_factory=set)
    # file URL -> error (ERRORS, or the caller's for a failed fetch, e.g. "http_404"); "loop" = listed again
    errors: dict[str, str] = field(default_factory=dict)
    pages: dict[str, SitemapEntry] = field(default_factory=dict)  # loc -> entry (first listing wins)
    files: int = 0

    def add_roots(self, urls: Iterable[str]) -> None:
        for url in urls:
            self._enqueue(url, 0)

    def next_file(self) -> tuple[str, int] | None:
        """The next (sitemap URL, depth) to fetch, or None when the walk is done."""
        return self.queue.popleft() if self.queue else None

    def failed(self, url: str, error: str) -> None:
        """A file that could not be fetched (the caller's error text, e.g. ``http_404``)."""
        self.errors[url] = error

    def fed(self, url: str, depth: int, parsed: SitemapFile) -> list[SitemapEntry]:
        """Take a parsed file; returns its new page entries (children are queued)."""
        if parsed.error is not None:
            self.errors[url] = parsed.error
        new = [e for e in parsed.entries if e.loc not in self.pages]
        for e in new:
            self.pages[e.loc] = e
        for child in parsed.sitemaps:
            if depth + 1 > self.limits.max_depth:
                self.errors.setdefault(child.loc, "depth")
            else:
                self._enqueue(child.loc, depth + 1)
        return new

    def _enqueue(self, url: str, depth: int) -> None:
        if url in self.seen:
            self.errors.setdefault(url, "loop")
            return
        if self.files >= self.limits.max_files:
            self.errors.setdefault(url, "too_many_files")
            return
        self.seen.add(url)
        self.files += 1
        self.queue.append((url, depth))
