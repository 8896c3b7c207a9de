"""The link-processing logic of the MapReduce jobs, as plain functions.

mrjob is unmaintained, so the jobs in this package are thin shells: every mapper and reducer body is
a function here, importable by the embedded crawl engine and by any other runner. Values that cross
the shuffle are plain JSON (lists and dicts), never pickles.

Every reducer here is insensitive to the order of its values, so all runners (inline, local, Spark,
Hadoop) give the same output for the same input, whatever the partitioning.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from fetchers.records import FetchResult
from fetchers.redirects import stopped_target, target_hops
from fetchers.schema import SchemaError
from jobs import sitemap_links
from pipeline.links import extract, filtering
from pipeline.links.filtering import Candidate
from pipeline.storage.base import Store, UrlRecord, UrlState
from pipeline.urls import Scope, TrapRules, fingerprint, host_of, trap_reason

MAX_ANCHORS = 3  # anchor texts kept per target URL (the most frequent ones)
MAX_ANCHOR_CHARS = 120


@dataclass(frozen=True, slots=True)
class LinkRules:
    """What the extract step keeps: scope, depth limit, trap rules, per-page link cap."""

    scope: Scope
    traps: TrapRules
    max_depth: int
    max_links: int = extract.DEFAULT_MAX_LINKS

    @classmethod
    def build(
        cls,
        *,
        allowed_domains: Sequence[str] = (),
        max_depth: int,
        max_links: int = extract.DEFAULT_MAX_LINKS,
        traps: TrapRules | None = None,
        allow_regex: Sequence[str] = (),
        deny_regex: Sequence[str] = (),
    ) -> LinkRules:
        """Rules from job arguments. No ``allowed_domains`` means no domain restriction."""
        scope = Scope(
            domains=frozenset(d.lower().strip(".") for d in allowed_domains if d),
            allow=tuple(re.compile(p) for p in allow_regex),
            deny=tuple(re.compile(p) for p in deny_regex),
        )
        return cls(scope=scope, traps=traps or TrapRules(), max_depth=max_depth, max_links=max_links)


def traps_arg(traps: TrapRules) -> str:
    return f"{traps.max_url_length},{traps.max_path_depth},{traps.max_repeated_segments}"


def traps_from_arg(text: str) -> TrapRules:
    """``traps_arg``'s inverse; "" means the defaults. ValueError on anything else."""
    if not text:
        return TrapRules()
    length, depth, repeated = (int(x) for x in text.split(","))
    return TrapRules(length, depth, repeated)


# --- segment records ---------------------------------------------------------------------------


SEGMENT_KEY = "crawlfleet_segment"  # a manifest line names one segment: {"crawlfleet_segment": PATH}
_SEGMENT_PREFIX = '{"' + SEGMENT_KEY + '":'


def segment_manifest_line(path: str) -> str:
    """The manifest line naming one segment (an absolute path or a storage URI) for ``mr_extract_links``."""
    return json.dumps({SEGMENT_KEY: path}, separators=(",", ":"))


def segment_ref(line: str | bytes) -> str | None:
    """The segment a manifest line names, or None for any other line (a fetch result, or garbage)."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    if not text.startswith(_SEGMENT_PREFIX):
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    ref = obj.get(SEGMENT_KEY) if isinstance(obj, dict) else None
    return ref if isinstance(ref, str) and ref else None


def segment_lines(ref: str) -> Iterator[bytes]:
    """The lines of a segment named by a local path or a ``file://``, ``hdfs://`` or ``s3://`` URI, opened
    where the task runs (OSError when it cannot be read)."""
    if ref.startswith("/") or ref.startswith("file://"):
        with open(ref.removeprefix("file://"), "rb") as fh:
            yield from fh
        return
    from pipeline.storage import uris

    loc = uris.locate(ref)
    with loc.fs.open(loc.path, "rb") as fh:
        yield from fh


def decode_result(line: str | bytes) -> FetchResult | None:
    """One segment line as a FetchResult, or None for a torn or invalid line."""
    try:
        return FetchResult.from_json(json.loads(line))
    except (ValueError, SchemaError):
        return None


@dataclass(frozen=True, slots=True)
class Quarantined:
    """What the extract job must not parse: pages whose parse killed extract tasks, and hosts with
    ``fetch.parse_failed_per_host`` such pages (``pipeline.transport.links.quarantine``)."""

    urls: frozenset[str] = frozenset()
    hosts: frozenset[str] = frozenset()

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and (url in self.urls or (bool(self.hosts) and host_of(url) in self.hosts))


def read_quarantine(path: str) -> Quarantined:
    """A quarantine file's entries: JSON lines with a "url" or a "host". Unreadable lines and a missing
    file name nothing."""
    urls: set[str] = set()
    hosts: set[str] = set()
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                with contextlib.suppress(ValueError, TypeError, AttributeError):
                    obj = json.loads(line)
                    if "url" in obj:
                        urls.add(str(obj["url"]))
                    elif "host" in obj:
                        hosts.add(str(obj["host"]))
    except OSError:
        pass
    return Quarantined(frozenset(urls), frozenset(hosts))


def page_candidates(
    result: FetchResult, rules: LinkRules, *, stats: MutableMapping[str, int] | None = None
) -> list[Candidate]:
    """Extract and filter the links of one fetch result (S3 step 4). Nothing for failures/non-HTML, but
    the sitemap files a robots.txt note on any result names (``sitemap_links.robots_candidates``).

    ``result.nofollow`` (the fetcher's X-Robots-Tag view) drops every link like a meta nofollow.
    """
    links = _links(result, rules, stats=stats)
    return sitemap_links.robots_candidates(result, rules, stats=stats) + links if result.robots else links


def _links(result: FetchResult, rules: LinkRules, *, stats: MutableMapping[str, int] | None) -> list[Candidate]:
    target = stopped_target(result)  # a redirect the node did not follow: its target is a link
    if target:
        ok = rules.scope.allows(target) and not trap_reason(target, rules.traps)
        hops = target_hops(result)  # the node stopped at the redirect: the chain goes on as this link
        return [Candidate(target, fingerprint(target), host_of(target), result.depth, result.url,
                          redirect_hops=hops, link_meta=result.link_meta)] if ok else []  # fmt: skip
    if not result.ok or not result.body or result.nofollow:
        return []
    if (listed := sitemap_links.sitemap_candidates(result, rules, stats=stats)) is not None:  # #23: sitemaps
        return listed
    page = extract.extract(
        result.body,
        base_url=result.final_url or result.url,
        content_type=result.content_type,
        max_links=rules.max_links,
    )
    if stats is not None:
        stats["links"] = stats.get("links", 0) + len(page.links)
        if page.truncated:
            stats["pages_truncated"] = stats.get("pages_truncated", 0) + 1
    return filtering.candidates(
        result.url,
        result.final_url,
        result.depth,
        page,
        scope=rules.scope,
        traps=rules.traps,
        max_depth=rules.max_depth,
        stats=stats,
    )


# --- extract: map and reduce --------------------------------------------------------------------


def link_value(c: Candidate) -> list[Any]:
    """The shuffle value for one candidate alone: a partial of one in-link (see ``LinkCombiner``)."""
    anchor = c.anchor[:MAX_ANCHOR_CHARS]
    return [c.depth, c.source, 1, {anchor: 1} if anchor else {}, c.redirect_hops, *_noted(c)]


def _noted(c: Candidate) -> list[list[Any]]:
    """A partial's optional last element: ``[depth, source, link meta]`` of its candidate with meta."""
    return [[c.depth, c.source, c.link_meta]] if c.link_meta else []


# A partial keeps at most this many anchor texts; past it, the rarest half is dropped. Only a URL
# linked under dozens of different texts loses any, and then only texts far from its top three.
_ANCHORS_KEPT = 32


class LinkCombiner:
    """In-mapper combining: the candidates of many pages folded into one partial per target URL.

    Most links of a site repeat on every page (navigation), so a mapper sees each target URL many
    times; shuffling one value per candidate cost more CPU than extracting them (JSON out, sort,
    JSON in). A partial is ``[depth, source, inlinks, {anchor: count}, redirect_hops(, [depth, source, meta])]``
    with the smallest ``(depth, source)`` seen, the number of in-linking pages, the anchor counts, the fewest
    redirect hops (0 once any page links to the URL: a chain is bounded by the hops that reach it) and, when
    a plugin's link to it had meta, the smallest ``(depth, source, meta)`` of those; ``merge_link_values``
    folds partials from any number of mappers into the same record as from single candidates. At most
    ``max_urls`` partials are held: ``add`` returns True when the caller should ``drain``.
    """

    __slots__ = ("_by_url", "max_urls")

    def __init__(self, *, max_urls: int = 100_000) -> None:
        self._by_url: dict[str, list[Any]] = {}
        self.max_urls = max_urls

    def __len__(self) -> int:
        return len(self._by_url)

    def add(self, c: Candidate, weight: int = 1) -> bool:
        """Fold ``c`` in (``weight``: the in-links it counts for, more than one for a plugin's priority link)."""
        anchor = c.anchor[:MAX_ANCHOR_CHARS] if c.anchor else ""
        part = self._by_url.get(c.url)
        if part is None:
            self._by_url[c.url] = [c.depth, c.source, weight, {anchor: 1} if anchor else {}, c.redirect_hops,
                                   *_noted(c)]  # fmt: skip
            return len(self._by_url) >= self.max_urls
        if c.depth < part[0] or (c.depth == part[0] and c.source < part[1]):
            part[0], part[1] = c.depth, c.source
        if c.redirect_hops < part[4]:
            part[4] = c.redirect_hops
        if c.link_meta and (len(part) < 6 or [c.depth, c.source, c.link_meta] < part[5]):
            part[5:] = _noted(c)
        part[2] += weight
        if anchor:
            anchors = part[3]
            anchors[anchor] = anchors.get(anchor, 0) + 1
            if len(anchors) > _ANCHORS_KEPT:
                part[3] = _top_anchors(anchors, _ANCHORS_KEPT // 2)
        return False

    def drain(self) -> Iterator[tuple[str, list[Any]]]:
        """Every partial held, once; the combiner is empty afterwards."""
        held, self._by_url = self._by_url, {}
        return iter(held.items())


def _top_anchors(anchors: Mapping[str, int], keep: int) -> dict[str, int]:
    return dict(sorted(anchors.items(), key=lambda kv: (-kv[1], kv[0]))[:keep])


_URL_FIRST = re.compile(rb'^\{"url":\s*"([^"\\]*)"')


def url_of_line(line: bytes) -> str:
    """The ``url`` of a link record given as the JSON line a job wrote (``merge_link_values``'s dict, its
    first key), without decoding the whole line; a line that does not start so is decoded."""
    m = _URL_FIRST.match(line)
    return m.group(1).decode() if m else str(json.loads(line)["url"])


def merge_link_values(url: str, values: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """One record per target URL from its partials (``link_value``, ``LinkCombiner``): min depth, its
    source (smallest at that depth), in-linking pages (one per page that links here: ``filtering``
    keeps one candidate per target per page), the most frequent anchor texts (ties by text), the
    fewest redirect hops (key absent when 0) and the link meta of the smallest ``(depth, source, meta)``
    that had one (key absent when none).
    Order- and grouping-insensitive: any split of the candidates into partials gives the same record."""
    depth: int | None = None
    source = ""
    inlinks = 0
    hops: int | None = None
    noted: list[Any] | None = None
    anchors: Counter[str] = Counter()
    for d, src, n, counts, *rest in values:  # rest: [redirect_hops(, noted)]; absent in an older partial
        inlinks += n
        anchors.update(counts)
        if depth is None or d < depth or (d == depth and src < source):
            depth, source = d, src
        h = int(rest[0]) if rest else 0
        hops = h if hops is None else min(hops, h)
        if len(rest) > 1 and (noted is None or list(rest[1]) < noted):
            noted = list(rest[1])
    top = sorted(anchors.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_ANCHORS]
    return {
        "url": url,
        "host": host_of(url),
        "depth": depth if depth is not None else 0,
        "source": source,
        "inlinks": inlinks,
        "anchors": [a for a, _ in top],
        **({"redirect_hops": hops} if hops else {}),
        **({"link_meta": noted[2]} if noted else {}),
    }


def merged_to_record(merged: dict[str, Any]) -> UrlRecord:
    """The crawl-db row for one merged extract record (PENDING, with its in-link count)."""
    url = merged["url"]
    return UrlRecord(
        url=url,
        url_id=fingerprint(url),
        host=merged.get("host") or host_of(url),
        depth=int(merged["depth"]),
        state=UrlState.PENDING,
        discovered_from=merged.get("source", ""),
        inlinks=max(1, int(merged.get("inlinks", 1))),
        redirect_hops=max(0, int(merged.get("redirect_hops", 0))),
        link_meta=str(merged.get("link_meta", "")),
    )


def pending_json(rec: UrlRecord) -> dict[str, Any]:
    """What the update step emits for a URL that just became PENDING."""
    return {
        "url": rec.url,
        "url_id": rec.url_id,
        "host": rec.host,
        "depth": rec.depth,
        "source": rec.discovered_from,
    }


# --- update crawl db ----------------------------------------------------------------------------


def open_store(spec: str) -> Store:
    """A Store from a job argument: ``sqlite:PATH``, ``hbase`` or ``hbase://HOST:PORT/PREFIX``."""
    from pipeline.storage.factory import from_spec

    return from_spec(spec)


def tag_round(store: Store, round_id: str) -> bool:
    """Tag the store's later in-link counts with a link-jobs round (``set_link_round`` of the HBase and SQLite
    stores: a re-run of the round counts no URL twice). False when the store has no round tags."""
    setter = getattr(store, "set_link_round", None)
    if setter is None:
        return False
    setter(round_id)
    return True


def update_batches(
    seen: Any, merged: Iterable[dict[str, Any]], *, batch_size: int = 500
) -> Iterator[UrlRecord]:
    """Merge extract records into the crawl db through a SeenFilter, ``batch_size`` per round trip.

    Yields the records that became PENDING. Known URLs only get their in-link counts raised (the
    SeenFilter buffers those of local hits; call ``seen.flush()`` at the end).
    """
    buf: list[UrlRecord] = []
    for m in merged:
        buf.append(merged_to_record(m))
        if len(buf) >= batch_size:
            yield from seen.add_new(buf)
            buf = []
    if buf:
        yield from seen.add_new(buf)
