"""MapReduce: pages, bytes, errors and status classes per host, from a segment of fetch results.

Output: JSON lines ``{"host", "pages", "ok", "errors", "bytes", "wire_bytes", "s2xx".."s5xx"}``
(feeds the crawl report). Sums are associative, so a combiner cuts the shuffle to one row per host
per mapper.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mrjob.job import MRJob
from mrjob.protocol import JSONProtocol, JSONValueProtocol, RawValueProtocol
from mrjob.step import MRStep

from jobs import hoststats, logic


class MRHostStats(MRJob):
    INPUT_PROTOCOL = RawValueProtocol
    INTERNAL_PROTOCOL = JSONProtocol
    OUTPUT_PROTOCOL = JSONValueProtocol

    def steps(self) -> list[MRStep]:
        return [MRStep(mapper=self.counter_map, combiner=self.counter_combine, reducer=self.counter_reduce)]

    def counter_map(self, _: None, line: str) -> Iterator[tuple[str, list[int]]]:
        result = logic.decode_result(line)
        if result is None:
            self.increment_counter("host_stats", "bad_lines")
            return
        kv = hoststats.host_stat_value(result)
        if kv is not None:
            yield kv

    def counter_combine(self, host: str, values: Iterator[list[int]]) -> Iterator[tuple[str, list[int]]]:
        yield host, hoststats.sum_host_values(values)

    def counter_reduce(self, host: str, values: Iterator[list[int]]) -> Iterator[tuple[None, dict[str, Any]]]:
        yield None, hoststats.host_stats_record(host, hoststats.sum_host_values(values))


if __name__ == "__main__":
    MRHostStats.run()
