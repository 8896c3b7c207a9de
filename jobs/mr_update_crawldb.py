"""MapReduce step 2 (S3 step 4, S5): merge extracted links into the crawl database.

Input: the output of ``mr_extract_links`` (one JSON record per target URL). Each mapper opens the
Store (``--store sqlite:PATH``, ``hbase`` or ``hbase://HOST:PORT/PREFIX``) and puts S5's SeenFilter
in front of it: a bounded LRU of fingerprints answers repeats locally and the rest goes to the store
in batches of ``--batch-size`` (one round trip each). New URLs become PENDING; known ones only gain
in-links.
Output: JSON lines of the URLs that became PENDING.

Re-crawling (issue #23): when the store's meta holds the crawl's recrawl settings, the runner also passes
the round's segments (manifest lines naming their URIs, opened where the task runs); their fetch results (lines with ``timings``) give each fetched URL its next fetch
(``jobs/recrawl.py``: the embedded crawl's planning function, each host's rate histogram in the store),
written with ``Store.put_revisits`` in batches of ``--batch-size``; a sitemap among them makes the known pages
whose ``lastmod`` is newer than their stored copy due (``recrawl.apply_lastmods``). Pages named in
``--quarantine`` (their parse killed extract tasks) are compared by exact digest only, never parsed here.

In-links: with ``--no-inlinks`` (the crawl's ``dispatch.priority`` is not ``inlinks``) known URLs are only
looked up, as the embedded crawl does then; new URLs still start with the round's in-link count.

Idempotent rounds (#18 point 6): ``--round-id`` tags every in-link count the mappers write with the round
(``Store.set_link_round``: HBase one blind cell per URL and round, or ``m:L`` for ids that do not sort in merge
order (``pipeline/storage/hbase_inlinks.py``); SQLite ``link_rounds``), so a round killed inside its merge and
run again under the same id from the same segments counts each URL's in-links once.

Map tasks are short-lived, so the driver carries the cache from round to round: ``--seen-snapshot``
ships the fingerprints the previous rounds saw (jobs/snapshot.py) and each task preloads its LRU; a merge
run inline in the driver's process (``--seen-in-process``) borrows the driver's cache itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from mrjob.job import MRJob
from mrjob.protocol import JSONValueProtocol, RawValueProtocol
from mrjob.step import MRStep

from fetchers.records import FetchResult
from fetchers.schema import SchemaError
from jobs import logic, recrawl, snapshot
from pipeline.frontier.dedup import SeenFilter
from pipeline.storage.base import UrlRecord


class MRUpdateCrawlDb(MRJob):
    # Raw lines: a torn segment line (a crash mid-write) is counted, not a failed task.
    INPUT_PROTOCOL = RawValueProtocol
    OUTPUT_PROTOCOL = JSONValueProtocol

    def configure_args(self) -> None:
        super().configure_args()
        self.add_passthru_arg("--store", required=True, help="sqlite:PATH, hbase or hbase://HOST:PORT/PREFIX")
        self.add_passthru_arg("--batch-size", type=int, default=500)
        self.add_passthru_arg("--lru-size", type=int, default=200_000)
        self.add_file_arg(
            "--seen-snapshot", help="fingerprints the store holds (jobs/snapshot.py), to preload the LRU"
        )
        self.add_passthru_arg(
            "--seen-in-process", action="store_true",
            help="use the seen-cache the driver lent in this process (jobs/snapshot.py; the inline runner)",
        )  # fmt: skip
        self.add_passthru_arg(
            "--round-id", default="", help="the round's id: a re-run under it counts no in-link twice"
        )
        self.add_passthru_arg(
            "--quarantine", default="", help="JSON lines naming pages (and hosts) the re-crawl must not parse"
        )
        self.add_passthru_arg(
            "--no-inlinks", dest="count_inlinks", action="store_false",
            help="known URLs keep their in-link counts (a crawl whose frontier does not order by them)",
        )  # fmt: skip

    def steps(self) -> list[MRStep]:
        return [MRStep(mapper_init=self.merger_init, mapper=self.merger_map, mapper_final=self.merger_final)]

    def merger_init(self) -> None:
        self.store = logic.open_store(self.options.store)
        if self.options.round_id and not logic.tag_round(self.store, self.options.round_id):
            self.increment_counter(
                "update", "round_not_tagged"
            )  # a store without round tags: counts as before
        carrying = self.options.seen_in_process or self.options.seen_snapshot
        store_token = snapshot.store_token(self.store, create=False) if carrying else None  # one meta read
        carried = snapshot.lent(store_token) if self.options.seen_in_process else None
        self.seen = SeenFilter(
            self.store, lru_size=self.options.lru_size, track_inlinks=self.options.count_inlinks,
            lru=carried.ids if carried is not None else None,
        )  # fmt: skip
        if carried is not None:
            self.increment_counter("dedup", "carried", len(carried.ids))
        elif self.options.seen_in_process:
            self.increment_counter("dedup", "snapshot_ignored")
        if self.options.seen_snapshot:
            token, ids = snapshot.read(self.options.seen_snapshot)
            if token and token == store_token:
                self.seen.preload(ids)
                self.increment_counter("dedup", "preloaded", len(ids))
            else:
                self.increment_counter("dedup", "snapshot_ignored")
        self.buf: list[dict[str, Any]] = []
        self.schedule = recrawl.recrawl_schedule(self.store)
        self.results: list[FetchResult] = []
        # pages whose parse killed extract tasks (pipeline/transport/links/quarantine.py): no simhash for them
        self.unparsed = logic.read_quarantine(self.options.quarantine) if self.options.quarantine else ()

    def merger_map(self, _: None, line: str) -> Iterator[tuple[None, dict[str, Any]]]:
        segment = logic.segment_ref(line)
        if segment is not None:  # a manifest line naming one of the round's segments (re-crawling)
            for raw in logic.segment_lines(segment):
                yield from self.merger_map(None, raw.decode("utf-8", "replace"))
            return
        try:
            merged = json.loads(line)
        except ValueError:
            self.increment_counter("update", "bad_lines")
            return
        if not isinstance(merged, dict):
            self.increment_counter("update", "bad_lines")
            return
        yield from self.take(merged)

    def take(self, merged: dict[str, Any]) -> Iterator[tuple[None, dict[str, Any]]]:
        """One input record: a fetch result (re-crawl scheduling) or an extracted link target."""
        if "timings" in merged:  # a fetch result from the round's segments: re-crawl scheduling
            self._observe(merged)
            return
        self.buf.append(merged)
        if len(self.buf) >= self.options.batch_size:
            yield from self._flush()

    def _observe(self, obj: dict[str, Any]) -> None:
        if self.schedule is None:
            return
        try:
            self.results.append(FetchResult.from_json(obj))
        except SchemaError:
            self.increment_counter("recrawl", "bad_results")
            return
        if len(self.results) >= self.options.batch_size:
            self._schedule()

    def _schedule(self) -> None:
        batch, self.results = self.results, []
        if self.schedule is not None and batch:
            self.increment_counter(
                "recrawl", "scheduled",
                recrawl.schedule_results(self.store, self.schedule, batch, unparsed=self.unparsed),
            )
            # after the batch's own fetches are scheduled: a page fetched after its sitemap stays as it is
            self.increment_counter(
                "recrawl", "lastmod_due", recrawl.apply_lastmods(self.store, self.schedule, batch)
            )

    def merger_final(self) -> Iterator[tuple[None, dict[str, Any]]]:
        self._schedule()
        yield from self._flush()
        self.seen.flush()
        self.store.flush()
        self.store.close()
        stats = self.seen.stats
        for name in ("local_hits", "remote_lookups", "round_trips", "inlink_updates", "new"):
            self.increment_counter("dedup", name, getattr(stats, name))

    def _flush(self) -> Iterator[tuple[None, dict[str, Any]]]:
        batch, self.buf = self.buf, []
        new: list[UrlRecord] = list(
            logic.update_batches(self.seen, batch, batch_size=self.options.batch_size)
        )
        for rec in new:
            yield None, logic.pending_json(rec)


if __name__ == "__main__":
    MRUpdateCrawlDb.run()
