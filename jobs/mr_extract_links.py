"""MapReduce step 1 (S3 step 4): extract and filter the links of segments of fetch results.

Input: manifest lines, one per segment: ``{"crawlfleet_segment": "/abs/path/of/segment.jsonl"}``
(``jobs.runner.extract_links`` writes them). The mapper opens the segment itself and reads its JSON lines
of ``FetchResult.to_json()``, so one mapper call covers a whole segment: no per-page trip through the
runner's streaming protocol, and on Spark and Hadoop the JVM, the Python workers and the shuffle are paid
per segment, not per page (issue #18 point 2). A plain ``FetchResult`` line is still taken as one page,
so a segment given directly as input works too (one page per mapper call, as before).

Segments are read where the task runs: a local path or ``file://`` URI on storage every task sees (one
box, or a shared mount). A manifest naming a segment the task cannot open fails the task (a missing
segment's links would be lost silently otherwise); the round is then run again.

Output: JSON lines, one per target URL:
``{"url", "host", "depth" (min), "source", "inlinks" (pages), "anchors" (up to 3)}``.
The mapper combines in memory (``logic.LinkCombiner``): it emits one partial per target URL it saw,
not one value per link, so the shuffle carries about one record per distinct URL and mapper.
The mapper and reducer bodies are ``jobs.logic`` functions, shared with the embedded crawl engine.
With ``--one-task`` (the round's only map task: ``jobs.runner.extract_links`` passes it) the step is map
only: the task's combiner holds every target URL it saw, so its records are already one per URL and it
writes them merged itself; the sort, the reducer's decoding and the second encoding were a seventh of a
small round's CPU, for nothing.

Hostile pages (``pipeline.links.guard``): with ``--guard-dir`` each page is parsed under a guard, so a task
that dies inside the parser (a crash, or ``--parse-cpu-limit`` seconds of CPU on one page) leaves a marker
naming the page; the link service counts those deaths and lists a page that killed two tasks in the
``--quarantine`` file (and a host with ``fetch.parse_failed_per_host`` such pages). A listed page, or a
page of a listed host, is not parsed (counter ``extract/quarantined``): its links are lost, the other
pages of its segment are not.

Plugins (``--plugin module:Name``, repeatable; their code comes with ``--py-files``): each page goes through
``jobs.plugged.page_candidates`` (its links with the plugins' links and URL filters, and its items), and
each segment's items are written under ``--items-root`` by the task itself (``jobs.plugged.SegmentItems``:
one file per segment, through fsspec; ``--store`` is read to keep only the fetches the crawl db recorded).
Counters ``items/*``. A plugin that raises costs its page that plugin's output, never the task.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mrjob.job import MRJob
from mrjob.protocol import JSONProtocol, JSONValueProtocol, RawValueProtocol
from mrjob.step import MRStep

from fetchers.records import FetchResult
from jobs import logic
from pipeline.links.filtering import Candidate
from pipeline.links.guard import ParseGuard

if TYPE_CHECKING:
    from types import ModuleType

    from jobs.plugged import SegmentItems
    from pipeline.plugins.chain import PluginSet


class MRExtractLinks(MRJob):
    INPUT_PROTOCOL = RawValueProtocol
    INTERNAL_PROTOCOL = JSONProtocol
    OUTPUT_PROTOCOL = JSONValueProtocol

    def configure_args(self) -> None:
        super().configure_args()
        self.add_passthru_arg("--allowed-domain", action="append", default=[], help="repeatable; none = any")
        self.add_passthru_arg("--max-depth", type=int, default=10)
        self.add_passthru_arg("--max-links", type=int, default=10_000, help="cap per page")
        self.add_passthru_arg(
            "--allow-regex", action="append", default=[], help="repeatable; a URL must match one"
        )
        self.add_passthru_arg(
            "--deny-regex", action="append", default=[], help="repeatable; a match drops the URL"
        )
        self.add_passthru_arg(
            "--traps", default="", help="MAX_URL_LENGTH,MAX_PATH_DEPTH,MAX_REPEATED_SEGMENTS"
        )
        self.add_passthru_arg("--guard-dir", default="", help="markers of the page each task parses")
        self.add_passthru_arg("--parse-cpu-limit", type=float, default=3.0, help="CPU s per page; 0 = none")
        self.add_passthru_arg("--quarantine", default="", help="JSON lines of URLs and hosts not to parse")
        self.add_passthru_arg("--plugin", action="append", default=[], help="module:Name, repeatable")
        self.add_passthru_arg("--items-root", default="", help="where the plugins' items go (path or URI)")
        self.add_passthru_arg("--items-format", default="jsonl", choices=("jsonl", "parquet", "both"))
        self.add_passthru_arg("--item-max-bytes", type=int, default=1024 * 1024)
        self.add_passthru_arg("--store", default="", help="the crawl db (which fetch of a page it recorded)")
        self.add_passthru_arg("--one-task", action="store_true", help="the only map task: no reduce step")

    def steps(self) -> list[MRStep]:
        if self.options.one_task:
            return [MRStep(mapper_init=self.extractor_init, mapper=self.extractor_map,
                           mapper_final=self.extractor_final_merged)]  # fmt: skip
        return [
            MRStep(
                mapper_init=self.extractor_init,
                mapper=self.extractor_map,
                mapper_final=self.extractor_final,
                reducer=self.merger_reduce,
            )
        ]

    def extractor_init(self) -> None:
        self.rules = logic.LinkRules.build(
            allowed_domains=self.options.allowed_domain,
            max_depth=self.options.max_depth,
            max_links=self.options.max_links,
            allow_regex=self.options.allow_regex,
            deny_regex=self.options.deny_regex,
            traps=logic.traps_from_arg(self.options.traps),
        )
        self.drops: dict[str, int] = {}
        # counted here, reported once (a counter costs a write to stderr)
        self.lines = {"results": 0, "bad_lines": 0, "segments": 0, "quarantined": 0}
        # The only task keeps every URL to the end (its records must be one per URL); others drain when full.
        self.combiner = logic.LinkCombiner(max_urls=1 << 62) if self.options.one_task else logic.LinkCombiner()
        self.skip = logic.read_quarantine(self.options.quarantine) if self.options.quarantine else logic.Quarantined()
        self.guard: ParseGuard | None = None
        if self.options.guard_dir:
            Path(self.options.guard_dir).mkdir(parents=True, exist_ok=True)
            marker = Path(self.options.guard_dir) / f"extract-{socket.gethostname()}-{os.getpid()}.marker"
            self.guard = ParseGuard(marker, cpu_limit_s=self.options.parse_cpu_limit)
        self.plugins: PluginSet | None = None
        if self.options.plugin:  # the plugin machinery is imported by the tasks that run plugins only
            from jobs import plugged

            self.plugged: ModuleType = plugged
            self.plugins = plugged.load(self.options.plugin, item_max_bytes=self.options.item_max_bytes)
            self.items: SegmentItems = plugged.SegmentItems()
        self.item_counts: dict[str, int] = {}
        self._store: Any = None

    def extractor_map(self, _: None, line: str) -> Iterator[tuple[str, list[Any]]]:
        segment = logic.segment_ref(line)
        if segment is None:
            yield from self._page(line)
            return
        self.lines["segments"] += 1
        for raw in logic.segment_lines(segment):
            yield from self._page(raw)
        if self.plugins is not None:
            self._write_items(self.plugged.segment_name(segment))

    def _write_items(self, name: str) -> None:
        if not self.options.items_root:  # links only: the items have nowhere to go
            self.items.pages = []
            return
        if self._store is None and self.options.store:
            self._store = logic.open_store(self.options.store)
        counts = self.items.write(self.options.items_root, name, fmt=self.options.items_format, store=self._store)
        self.plugged.task_counters(counts, self.item_counts)

    def _page(self, line: str | bytes) -> Iterator[tuple[str, list[Any]]]:
        result = logic.decode_result(line)
        if result is None:
            self.lines["bad_lines"] += 1
            return
        self.lines["results"] += 1
        if result.url in self.skip:
            self.lines["quarantined"] += 1
            return
        boost: dict[int, int] = {}
        if self.plugins is not None:
            cands, boost = self._plugged(result)
        elif self.guard is None:
            cands = logic.page_candidates(result, self.rules, stats=self.drops)
        else:
            with self.guard.page(0, result.url):
                cands = logic.page_candidates(result, self.rules, stats=self.drops)
        add = self.combiner.add
        if boost:  # links a plugin gave a priority count for more in-links
            for cand in cands:
                if add(cand, 1 + boost.get(cand.url_id, 0)):
                    yield from self.combiner.drain()
            return
        for cand in cands:
            if add(cand):
                yield from self.combiner.drain()

    def _plugged(self, result: FetchResult) -> tuple[list[Candidate], dict[int, int]]:
        assert self.plugins is not None
        page_candidates = self.plugged.page_candidates
        if self.guard is None:
            cands, run, boost = page_candidates(result, self.rules, self.plugins, stats=self.drops)
        else:
            with self.guard.page(0, result.url):
                cands, run, boost = page_candidates(result, self.rules, self.plugins, stats=self.drops)
        self.items.add(result, run)
        return cands, boost

    def extractor_final(self) -> Iterator[tuple[str, list[Any]]]:
        if self.plugins is not None and self.items.pages:  # pages given as lines, not as segments
            self._write_items(f"tasks/{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        if self._store is not None:
            self._store.close()
        for name, n in self.item_counts.items():
            if n:
                self.increment_counter("items", name, n)
        if self.guard is not None:  # a task that ends well leaves no marker behind
            self.guard.close()
            with contextlib.suppress(OSError):
                self.guard.path.unlink()
        yield from self.combiner.drain()
        for name, n in self.lines.items():
            if n:
                self.increment_counter("extract", name, n)
        for reason, n in sorted(self.drops.items()):
            self.increment_counter("links", reason, n)

    def extractor_final_merged(self) -> Iterator[tuple[None, dict[str, Any]]]:
        """``extractor_final`` of the only task: each URL's partial merged into its output record."""
        for url, partial in self.extractor_final():
            yield None, logic.merge_link_values(url, [partial])

    def merger_reduce(self, url: str, values: Iterator[list[Any]]) -> Iterator[tuple[None, dict[str, Any]]]:
        yield None, logic.merge_link_values(url, values)


if __name__ == "__main__":
    MRExtractLinks.run()
