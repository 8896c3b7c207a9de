"""The extract job's side of plugins: a page's candidates with the plugins, and one item file per segment.

``mr_extract_links`` with ``--plugin`` runs ``page_candidates`` instead of ``logic.page_candidates`` (the same
rules, one parse tree for the links and the extractors: ``pipeline.plugins.prepare``) and collects the
pages' item lines per segment in a ``SegmentItems``. When a segment is done, ``SegmentItems.write`` puts its
items at ``ROOT/NODE/SEGMENT.jsonl`` (and ``.parquet``) through fsspec, whole (``itemfiles.write_whole``):

* one item set per page version (``pipeline.frontier.versions.item_verdict``, on the pages' crawl-db rows:
  one batched read per segment): a page's items are kept only when the crawl db recorded that very fetch
  (its row's ``fetched_at``) and, with re-crawling on, when the fetch is a new version of the page (its
  digest is not the one the URL's re-crawl state holds for the copy before). A node killed after writing
  its segment but before recording it leaves a copy the link jobs adopt while the URL is fetched again
  elsewhere: that copy gives no items, the recorded fetch does. An unchanged re-fetch gives none either
  (counter ``items/same_version``);
* a segment's file is never written twice: a round run again after a kill finds it and leaves it (it was
  written whole, from the same segment), so a later re-fetch recorded meanwhile cannot take items away. A
  segment that gave no file (no page of it had items) is decided again; a fetch whose re-crawl state the
  round's update already wrote is then ``decided`` (its items, if any, went into that run's file).
Pages a plugin failed on are listed in ``SEGMENT.errors.jsonl`` beside (URL, fetch time, digest, error).
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from fetchers.records import FetchResult
from fetchers.redirects import stopped_target
from jobs import logic, sitemap_links
from pipeline.frontier.observation import observe
from pipeline.frontier.schedule import Observation
from pipeline.frontier.versions import Verdict, item_verdict
from pipeline.links import extract, filtering
from pipeline.links.filtering import Candidate
from pipeline.plugins.chain import PageRun, PluginSet
from pipeline.plugins.loading import build, resolve
from pipeline.plugins.prepare import page_links
from pipeline.storage.base import Store
from pipeline.storage.itemfiles import filesystem, parquet_bytes, write_whole

ERRORS_SUFFIX = ".errors.jsonl"


def load(specs: list[str], *, item_max_bytes: int) -> PluginSet | None:
    """The job's plugins from their specs (job arguments)."""
    return build((resolve(s) for s in specs), specs=specs, item_max_bytes=item_max_bytes)


def page_candidates(
    result: FetchResult, rules: logic.LinkRules, plugins: PluginSet, *, stats: MutableMapping[str, int] | None = None
) -> tuple[list[Candidate], PageRun | None, dict[int, int]]:
    """``logic.page_candidates`` with the plugins: the page's candidates (plugin links and URL filters in; a
    plugin link's meta on its candidate), what the plugins made of it (None: no extractor wanted it) and the
    plugin links' priorities by url_id."""
    if stopped_target(result) or not result.ok or not result.body:
        return logic.page_candidates(result, rules, stats=stats), None, {}
    if (listed := sitemap_links.sitemap_candidates(result, rules, stats=stats)) is not None:
        return listed, None, {}
    html = not result.nofollow and "html" in result.content_type.lower()
    plugged = page_links(result, plugins, html=html, max_links=rules.max_links, max_anchor=extract.DEFAULT_MAX_ANCHOR)
    page = plugged.page
    if page is None:
        return [], plugged.run, {}
    if stats is not None:
        stats["links"] = stats.get("links", 0) + len(page.links)
    cands = filtering.candidates(result.url, result.final_url, result.depth, page, scope=rules.scope,
                                 traps=rules.traps, max_depth=rules.max_depth, stats=stats)  # fmt: skip
    if plugged.link_meta:
        for cand in cands:
            cand.link_meta = plugged.link_meta.get(cand.url_id, "")
    return cands, plugged.run, plugged.boost


@dataclass(slots=True)
class _Page:
    url: str
    seen: Observation  # what the fetch saw: time, status, digest (``pipeline.frontier.observation``)
    run: PageRun


@dataclass(slots=True)
class SegmentItems:
    """The item lines of one segment's pages, until ``write``."""

    pages: list[_Page] = field(default_factory=list)

    def add(self, result: FetchResult, run: PageRun | None) -> None:
        if run is not None and (run.items or run.error_count):
            self.pages.append(_Page(result.url, observe(result), run))

    def write(self, root: str, name: str, *, fmt: str, store: Store | None) -> dict[str, int]:
        """Write the segment's items as ``ROOT/NAME.jsonl`` (see the module docstring); counters."""
        counts = {"pages": 0, "items": 0, "errors": 0, "exists": 0}
        counts |= {v.value: 0 for v in Verdict if v is not Verdict.WRITE}  # unrecorded, same_version, decided
        if not self.pages:
            return counts
        fs, base = filesystem(root)
        primary = f"{base}/{name}.{'parquet' if fmt == 'parquet' else 'jsonl'}"
        if fs.exists(primary):
            counts["exists"] = 1
            return counts
        recorded = store.get_urls([p.url for p in self.pages]) if store is not None else {}
        lines: list[bytes] = []
        errors: list[bytes] = []
        for page in self.pages:
            verdict = item_verdict(recorded.get(page.url), page.seen, check_recorded=store is not None)
            if verdict is not Verdict.WRITE:
                counts[verdict.value] += 1
                continue
            if page.run.items:
                lines.append(page.run.items)
                counts["pages"] += 1
                counts["items"] += page.run.count
            for text in page.run.errors:
                errors.append(json.dumps({"url": page.url, "fetched_at": page.seen.fetched_at,
                                          "digest": page.seen.digest, "error": text}, ensure_ascii=False).encode()
                              + b"\n")  # fmt: skip
            counts["errors"] += page.run.error_count
        if errors:
            write_whole(fs, f"{base}/{name}{ERRORS_SUFFIX}", b"".join(errors))
        if lines:
            data = b"".join(lines)
            if fmt != "jsonl":
                write_whole(fs, f"{base}/{name}.parquet", parquet_bytes(data.splitlines(keepends=True)))
            if fmt != "parquet":
                write_whole(fs, f"{base}/{name}.jsonl", data)
        self.pages = []
        return counts


def segment_name(ref: str) -> str:
    """``NODE/SEGMENT`` of a segment path or URI (its node directory and file name without ``.jsonl``)."""
    parts = ref.rstrip("/").split("/")
    stem = parts[-1].removesuffix(".jsonl")
    return f"{parts[-2]}/{stem}" if len(parts) >= 2 and parts[-2] else stem


def task_counters(counts: dict[str, Any], into: dict[str, int]) -> None:
    for key, n in counts.items():
        into[key] = into.get(key, 0) + int(n)
