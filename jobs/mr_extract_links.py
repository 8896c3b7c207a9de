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
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mrjob.job import MRJob
from mrjob.protocol import JSONProtocol, JSONValueProtocol, RawValueProtocol
from mrjob.step import MRStep

from jobs import logic


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

    def steps(self) -> list[MRStep]:
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
        self.lines = {"results": 0, "bad_lines": 0, "segments": 0}
        self.combiner = logic.LinkCombiner()

    def extractor_map(self, _: None, line: str) -> Iterator[tuple[str, list[Any]]]:
        segment = logic.segment_ref(line)
        if segment is None:
            yield from self._page(line)
            return
        self.lines["segments"] += 1
        for raw in logic.segment_lines(segment):
            yield from self._page(raw)

    def _page(self, line: str | bytes) -> Iterator[tuple[str, list[Any]]]:
        result = logic.decode_result(line)
        if result is None:
            self.lines["bad_lines"] += 1
            return
        self.lines["results"] += 1
        add = self.combiner.add
        for cand in logic.page_candidates(result, self.rules, stats=self.drops):
            if add(cand):
                yield from self.combiner.drain()

    def extractor_final(self) -> Iterator[tuple[str, list[Any]]]:
        yield from self.combiner.drain()
        for name, n in self.lines.items():
            if n:
                self.increment_counter("extract", name, n)
        for reason, n in sorted(self.drops.items()):
            self.increment_counter("links", reason, n)

    def merger_reduce(self, url: str, values: Iterator[list[Any]]) -> Iterator[tuple[None, dict[str, Any]]]:
        yield None, logic.merge_link_values(url, values)


if __name__ == "__main__":
    MRExtractLinks.run()
