"""A whole link round as one MapReduce job, for runners on a cluster: the mapper extracts and filters links
(``mr_extract_links``), the reducer merges each target URL's links (as that job's reducer does) and feeds
them straight into the crawl db (``mr_update_crawldb``'s merge, in the reducer's own task).

One job, one application on YARN (a container start is most of a small job's time there) and one stage
less on Spark; the extracted link targets (one record per distinct URL) never pass through the driver,
which reads only the output: the URLs that became PENDING. When the crawl re-crawls (``--recrawl``) the
mapper also passes the round's segment names on, and the reducer reads their fetch results where it runs,
as ``mr_update_crawldb`` does from a manifest.

The two jobs share ``--store`` and ``--quarantine``; each option is defined once here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mrjob.protocol import JSONProtocol, JSONValueProtocol, RawValueProtocol
from mrjob.step import MRStep

from jobs import logic
from jobs.mr_extract_links import MRExtractLinks
from jobs.mr_update_crawldb import MRUpdateCrawlDb

_SEGMENTS = "\x00segment"  # the mapper's key for the round's segment names (no URL sorts or looks like it)


class MRLinkRound(MRExtractLinks, MRUpdateCrawlDb):
    INPUT_PROTOCOL = RawValueProtocol
    INTERNAL_PROTOCOL = JSONProtocol
    OUTPUT_PROTOCOL = JSONValueProtocol

    def configure_args(self) -> None:
        self._defined: set[str] = set()
        super().configure_args()  # MRExtractLinks, then MRUpdateCrawlDb (the MRO), each option once
        self.add_passthru_arg("--recrawl", action="store_true", help="pass the segments on to step 2")

    def add_passthru_arg(self, *args: Any, **kwargs: Any) -> None:
        if self._once(args):
            super().add_passthru_arg(*args, **kwargs)

    def add_file_arg(self, *args: Any, **kwargs: Any) -> None:
        if self._once(args):
            super().add_file_arg(*args, **kwargs)

    def _once(self, args: tuple[Any, ...]) -> bool:
        names = {a for a in args if isinstance(a, str) and a.startswith("--")}
        if names & self._defined:
            return False
        self._defined |= names
        return True

    def steps(self) -> list[MRStep]:
        return [
            MRStep(mapper_init=self.extractor_init, mapper=self.round_map, mapper_final=self.extractor_final,
                   reducer_init=self.merger_init, reducer=self.round_reduce, reducer_final=self.merger_final),
        ]  # fmt: skip

    def round_map(self, key: None, line: str) -> Iterator[tuple[str, Any]]:
        if self.options.recrawl:
            segment = logic.segment_ref(line)
            if segment is not None:
                yield _SEGMENTS, segment
        yield from self.extractor_map(key, line)

    def round_reduce(self, url: str, values: Iterator[Any]) -> Iterator[tuple[None, dict[str, Any]]]:
        if url == _SEGMENTS:  # the round's fetch results, for re-crawl scheduling
            for ref in values:
                for raw in logic.segment_lines(ref):
                    yield from self.merger_map(None, raw.decode("utf-8", "replace"))
            return
        for _, merged in self.merger_reduce(url, values):
            yield from self.take(merged)

if __name__ == "__main__":
    MRLinkRound.run()
