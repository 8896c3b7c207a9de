"""Typed records that cross the transport seam: a batch of URL tasks out, one FetchResult per URL back.

Both serialise to plain JSON (never pickle). ``from_json`` validates field types and raises
``SchemaError`` (fetchers/schema.py) on anything it does not expect, so a bad message is rejected before
use. Bodies travel compressed and base64-encoded, as ``body_z`` or ``body_lz4`` (fetchers/bodycodec.py).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from fetchers import linkmeta
from fetchers.bodycodec import decode_body, encode_body
from fetchers.robotsnote import RobotsNote, sent_from_json, sent_to_json
from fetchers.schema import SchemaError, field_of, finite_field, require, text_ok, to_float


@dataclass(slots=True)
class UrlTask:
    """One URL to fetch. ``url_id`` is the crawl-db fingerprint (signed 64-bit)."""

    url: str
    url_id: int
    depth: int = 0
    # Validators of the stored copy, for a conditional re-fetch (fetchers/conditional.py); "" = none.
    etag: str = ""
    last_modified: str = ""
    # Redirects that led here from a URL found as a link: where a fetcher stops at redirects (a fetch
    # process, a fleet node) a chain is a run of tasks, each the target of the one before, and this
    # count bounds it by ``fetch.max_redirects`` as one fetcher's hops are (fetchers/redirects.py).
    redirect_hops: int = 0
    # Not charged to ``scope.max_pages_per_host``, which counts the pages a host gives: a URL fetched before
    # and due again (re-crawling), or a robots.txt or sitemap file (``UrlRecord.infra``). The frontier's
    # own mark, never on the wire.
    uncharged: bool = False
    link_meta: str = ""  # the meta of the plugin link that found the URL (fetchers/linkmeta.py); "" = none


def task_json(t: UrlTask) -> list[Any]:
    """A task on the wire: ``[url, id, depth]``, plus ``[etag, last_modified]`` for a conditional
    re-fetch, plus ``[redirect_hops]`` inside a redirect chain, plus ``[link_meta]`` for a URL a plugin's
    link with meta found (the short form for the common case)."""
    if t.link_meta:
        return [t.url, t.url_id, t.depth, t.etag, t.last_modified, t.redirect_hops, t.link_meta]
    if t.redirect_hops:
        return [t.url, t.url_id, t.depth, t.etag, t.last_modified, t.redirect_hops]
    if t.etag or t.last_modified:
        return [t.url, t.url_id, t.depth, t.etag, t.last_modified]
    return [t.url, t.url_id, t.depth]


def task_from_json(item: Any) -> UrlTask:
    """The inverse of ``task_json``; raises ``SchemaError`` on anything else."""
    require(isinstance(item, list) and len(item) in (3, 5, 6, 7),
             "task must be [url, id, depth(, etag, lm(, hops(, meta)))]")  # fmt: skip
    url, url_id, depth = item[:3]
    etag, lm = item[3:5] if len(item) >= 5 else ("", "")
    hops = _hops(item[5] if len(item) >= 6 else 0, "task redirect hops")
    meta = item[6] if len(item) == 7 else ""
    require(linkmeta.valid(meta), "task link meta")
    require(isinstance(url, str) and isinstance(url_id, int) and isinstance(depth, int), "task types")
    require(not isinstance(url_id, bool) and not isinstance(depth, bool), "task types")
    require(isinstance(etag, str) and isinstance(lm, str), "task validators")
    require(text_ok(url) and text_ok(etag) and text_ok(lm), "task url")
    return UrlTask(url, url_id, depth, etag, lm, hops, link_meta=meta)


@dataclass(slots=True)
class Batch:
    """A unit of work: URLs grouped by host, under one strictly increasing serial id (S1)."""

    serial: int
    fetcher_id: str
    tasks: list[UrlTask]
    service: str = "default"
    issued_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "v": 1,
            "serial": self.serial,
            "fetcher_id": self.fetcher_id,
            "service": self.service,
            "issued_at": self.issued_at,
            "tasks": [task_json(t) for t in self.tasks],
        }

    @classmethod
    def from_json(cls, obj: Any) -> Batch:
        require(isinstance(obj, dict), "batch must be an object")
        serial = field_of(obj, "serial", int)
        tasks_raw = field_of(obj, "tasks", list)
        tasks = [task_from_json(item) for item in tasks_raw]
        return cls(
            serial=serial,
            fetcher_id=field_of(obj, "fetcher_id", str),
            tasks=tasks,
            service=field_of(obj, "service", str),
            issued_at=finite_field(obj, "issued_at"),
        )


_T = TypeVar("_T")


def _pickled_by_fields(cls: type[_T]) -> type[_T]:
    """Pickle ``cls`` as its field values in order. A slots dataclass otherwise pickles through its
    generated ``__getstate__``, ~5x slower; parse and fetch processes pickle every result (measured:
    ~20 us against ~3.5 us per page)."""
    get = operator.attrgetter(*[f.name for f in fields(cls)])  # type: ignore[arg-type]

    def reduce(self: _T) -> tuple[type[_T], tuple[Any, ...]]:
        return cls, get(self)

    cls.__reduce__ = reduce  # type: ignore[assignment,method-assign]
    return cls


@_pickled_by_fields
@dataclass(slots=True)
class Timings:
    dns_s: float = 0.0
    connect_s: float = 0.0
    ttfb_s: float = 0.0
    total_s: float = 0.0


@_pickled_by_fields
@dataclass(slots=True)
class PluginOutput:
    """The extraction plugins' output for one page: its item lines (JSON, ``pipeline.plugins.records``; b"":
    none), how many, the first errors of its plugins and their number, and the priority (url_id -> extra
    in-links) and meta of the links a plugin yielded."""

    items: bytes = b""
    count: int = 0
    errors: tuple[str, ...] = ()
    error_count: int = 0
    boost: dict[int, int] | None = None
    link_meta: dict[int, str] | None = None  # url_id -> the meta a plugin gave the link (fetchers/linkmeta.py)


@_pickled_by_fields
@dataclass(slots=True)
class Prepared:
    """What a fetch process computed for the core, so that the core's process does not have to: the
    result's journal line, and its page's link candidates (``None``: the page was not parsed)."""

    journal_line: bytes
    source: str = ""  # the normalized URL the links were found on
    # (url, url_id, host) at the result's depth + 1; None: the core extracts them itself
    links: list[tuple[str, int, str]] | None = None
    # (url, url_id) of the page's followable links, not yet checked (``pipeline.links.prepare.found_links``),
    # less those a parse process was told the seen-set holds for good (``ParsePool.note_known``); None: not
    # computed. The core filters and builds candidates from these when ``links`` is None.
    found: list[tuple[str, int]] | None = None
    packed: bytes = b""  # the body LZ4-packed as in the journal line (``PageRecord.body_lz4``); b'': not kept
    # Why the page has no links although it is HTML: its parse killed parser processes (the page's
    # row records it; ``pipeline.embedded.parseproc``). "": parsed, or not parseable.
    parse_error: str = ""
    # What the extraction plugins made of the page (``pipeline.plugins.prepare``); None: no plugin ran on it
    # (one field, so that a crawl without plugins pickles one None more per page, nothing else).
    plugged: PluginOutput | None = None
    # The page's text simhash for the re-crawl's near-duplicate test (recrawl.simhash_bits); 0: not computed.
    simhash: int = 0


@_pickled_by_fields
@dataclass(slots=True)
class FetchResult:
    """The outcome for one URL. ``status`` is 0 when no HTTP response was had (see ``error_class``)."""

    url: str
    url_id: int
    depth: int
    final_url: str = ""
    redirects: list[str] = field(default_factory=list)
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = ""
    body: bytes = b""
    truncated: bool = False
    wire_bytes: int = 0
    body_bytes: int = 0
    timings: Timings = field(default_factory=Timings)
    ip: str = ""
    error_class: str = ""
    error_message: str = ""
    serial: int = 0
    fetcher_id: str = ""
    fetched_at: float = 0.0
    retry_after_s: float | None = None
    # Robots/meta directives found by the fetcher's parser; links are extracted downstream.
    noindex: bool = False
    nofollow: bool = False
    redirect_hops: int = 0  # the task's (UrlTask.redirect_hops): a stopped redirect's target gets one more
    # robots.txt answers the fetcher loaded for this URL's origin (usually none; fetchers/robotsnote.py)
    robots: list[RobotsNote] = field(default_factory=list)
    # the requests this fetch made: (wall time started, status; 0 = no answer), hops and retries included
    sent: list[tuple[float, int]] = field(default_factory=list)
    link_meta: str = ""  # the task's (UrlTask.link_meta): what the page's extractors read as Page.meta
    # Work a fetch process did for the crawl core (pipeline/links/prepare.py); in memory only, never serialized.
    prepared: Prepared | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return not self.error_class and 200 <= self.status < 300

    def to_json(self, *, codec: str = "zlib", packed: bytes | None = None) -> dict[str, Any]:
        """JSON-ready dict; ``codec`` is "zlib" (field body_z) or "lz4" (field body_lz4). ``packed``: the
        body already compressed with ``bodycodec.pack_lz4`` (used as is for "lz4")."""
        body_field, body = encode_body(self.body, codec, packed)
        return {
            "v": 1,
            "url": self.url,
            "url_id": self.url_id,
            "depth": self.depth,
            "final_url": self.final_url,
            "redirects": self.redirects,
            "status": self.status,
            "headers": self.headers,
            "content_type": self.content_type,
            body_field: body,
            "truncated": self.truncated,
            "wire_bytes": self.wire_bytes,
            "body_bytes": self.body_bytes,
            "timings": [self.timings.dns_s, self.timings.connect_s, self.timings.ttfb_s, self.timings.total_s],
            "ip": self.ip,
            "error_class": self.error_class,
            "error_message": self.error_message,
            "serial": self.serial,
            "fetcher_id": self.fetcher_id,
            "fetched_at": self.fetched_at,
            "retry_after_s": self.retry_after_s,
            "noindex": self.noindex,
            "nofollow": self.nofollow,
            **({"redirect_hops": self.redirect_hops} if self.redirect_hops else {}),
            **({"robots": [n.to_json() for n in self.robots]} if self.robots else {}),
            **({"sent": sent_to_json(self.sent)} if self.sent else {}),
            **({"link_meta": self.link_meta} if self.link_meta else {}),
        }

    @classmethod
    def from_json(cls, obj: Any, *, max_body_bytes: int = 64 * 1024 * 1024) -> FetchResult:
        require(isinstance(obj, dict), "result must be an object")
        body = decode_body(obj, max_body_bytes)
        timings = field_of(obj, "timings", list)
        require(len(timings) == 4 and all(isinstance(t, int | float) for t in timings), "timings")
        timings = [to_float(t, "timings") for t in timings]
        headers = field_of(obj, "headers", dict)
        require(all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()), "headers")
        redirects = field_of(obj, "redirects", list)
        require(all(isinstance(r, str) for r in redirects), "redirects")
        retry_after = obj.get("retry_after_s")
        require(retry_after is None or isinstance(retry_after, int | float), "retry_after_s")
        url = field_of(obj, "url", str)
        final_url = field_of(obj, "final_url", str)
        require(text_ok(url) and text_ok(final_url), "url")
        require(linkmeta.valid(meta := obj.get("link_meta", "")), "link_meta")
        return cls(
            url=url,
            url_id=field_of(obj, "url_id", int),
            depth=field_of(obj, "depth", int),
            final_url=final_url,
            redirects=redirects,
            status=field_of(obj, "status", int),
            headers=headers,
            content_type=field_of(obj, "content_type", str),
            body=body,
            truncated=field_of(obj, "truncated", bool),
            wire_bytes=field_of(obj, "wire_bytes", int),
            body_bytes=field_of(obj, "body_bytes", int),
            timings=Timings(*timings),
            ip=field_of(obj, "ip", str),
            error_class=field_of(obj, "error_class", str),
            error_message=field_of(obj, "error_message", str),
            serial=field_of(obj, "serial", int),
            fetcher_id=field_of(obj, "fetcher_id", str),
            fetched_at=finite_field(obj, "fetched_at"),
            retry_after_s=None if retry_after is None else to_float(retry_after, "retry_after_s"),
            noindex=bool(obj.get("noindex", False)),
            nofollow=bool(obj.get("nofollow", False)),
            redirect_hops=_hops(obj.get("redirect_hops", 0), "redirect_hops"),  # absent: an older node's result
            robots=_robots(obj.get("robots", [])),
            sent=_sent(obj.get("sent", [])),
            link_meta=meta,
        )


def _robots(obj: Any) -> list[RobotsNote]:
    require(isinstance(obj, list) and len(obj) <= 16, "robots")
    try:
        return [RobotsNote.from_json(n) for n in obj]
    except ValueError as exc:
        raise SchemaError(str(exc)) from exc


def _sent(obj: Any) -> list[tuple[float, int]]:
    try:
        return sent_from_json(obj)
    except ValueError as exc:
        raise SchemaError(str(exc)) from exc


def _hops(value: Any, what: str) -> int:
    """A redirect hop count off the wire: an int in [0, 2**15) (the frontier keeps depths in 15 bits too)."""
    require(type(value) is int and 0 <= value < 1 << 15, what)
    return int(value)
