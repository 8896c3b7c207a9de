"""How a fetch result becomes durable: a mixin of ``CrawlCore`` (pipeline/crawl/core.py).

- ``on_result``: journal one result, then turn it into an outcome and discoveries (``_apply``);
- ``flush``: make every processed result durable in the store and move the journal checkpoint past it;
- ``_replay``: on resume, apply again what the journal holds past the last checkpoint, and settle the
  redirect chains a kill cut between hops.

Exactly-once, end to end:
1. a result is journaled (``SegmentWriter``) before anything else happens to it;
2. its discovered links are written to the store before its own outcome is (so a crash between the two
   replays the result rather than losing its links);
3. ``Store.record_results`` applies an outcome only while the URL is PENDING, so a replayed, re-delivered
   or duplicated result never stores a page twice; results of unknown or finished serials are dropped.
4. With write-behind (``store.write_behind``), outcomes and checkpoints are applied in order on a writer
   thread: the checkpoint never passes an unapplied outcome, and refills skip URLs whose outcome is
   still queued (the store shows them PENDING until it is applied).

May import: pipeline.storage, pipeline.frontier, pipeline.observe, fetchers, this room (crawl).
"""

from __future__ import annotations

from pathlib import Path

from fetchers.records import FetchResult
from fetchers.report import LEASE_LAPSED
from pipeline.crawl.discoveries import Discoveries
from pipeline.crawl.durable import Durable
from pipeline.crawl.hopjournal import HopJournal
from pipeline.crawl.inflight import InFlight
from pipeline.crawl.outcome import is_final, outcome_of, state_of
from pipeline.crawl.pageitems import PageItems
from pipeline.crawl.redirects import RedirectBook
from pipeline.crawl.revisits import Recrawler
from pipeline.frontier.dedup import SeenFilter
from pipeline.frontier.frontier import Frontier
from pipeline.observe.stats import CrawlStats
from pipeline.settings import Settings
from pipeline.storage.base import Outcome, Store, UrlState
from pipeline.storage.journal import Checkpoint, SegmentWriter, journal_parts, replay_positions

_FLUSH_EVERY = 256


class ResultPath:
    """The results half of ``CrawlCore``; the attributes below are the core's own."""

    settings: Settings
    store: Store
    durable: Durable
    journal: SegmentWriter
    out_dir: Path
    stats: CrawlStats
    flights: InFlight
    frontier: Frontier
    seen: SeenFilter
    found: Discoveries
    redirects: RedirectBook
    hops: HopJournal
    recrawl: Recrawler | None
    page_items: PageItems | None
    dropped_results: int
    _outcomes: list[Outcome]

    def _replay(self) -> int:
        """Apply the journal past the last checkpoint and the redirect chains a kill cut, durably; the
        number of journaled results replayed."""
        since = self.durable.since()
        replayed = 0
        for position, result in replay_positions(self.out_dir / "segments", since):
            if self.recrawl is not None:  # compared with the state the refill that leased it noted
                self.recrawl.note_replayed(result)
            self._apply(result, position=position)
            replayed += 1
            if len(self._outcomes) >= _FLUSH_EVERY:
                self._flush_store()
        self._flush_store()
        self.durable.checkpoint()
        self.durable.drain()  # the rows read after this must show every replayed outcome
        cut = self.hops.interrupted(self.store)  # chains the kill cut between hops: settled up to the last
        for result in cut:
            self._apply(result)
        if cut:
            self._flush_store()
            self.durable.checkpoint()
            self.durable.drain()
        self.hops.clear()
        return replayed

    def on_result(self, result: FetchResult, *, stored: bool = False) -> None:
        """Journal, then process one result. Results of unknown serials are dropped and counted.

        ``stored``: a fleet fetch node recorded this result's outcome (and page) in the store before
        replying, and its links reach the store through the link jobs. A final stored result is only
        counted and settled here: no journal line, no outcome, no link extraction.
        """
        flight = self.flights.owning(result)
        if flight is None:
            self.dropped_results += 1
            return
        self.redirects.release((result.url_id,))  # its chain ended: what it requested is settled below
        if stored and is_final(result):
            self.flights.settle(flight, result.url_id)
            self._count(result)
            return
        packed = b""
        if result.prepared is not None:
            self.journal.append_line(result.prepared.journal_line)
            packed = result.prepared.packed
        else:
            line, packed = journal_parts(result)
            self.journal.append_line(line)
        final = is_final(result)
        if not final and result.error_class != LEASE_LAPSED:  # never attempted: not a try against the host
            final = self.flights.retry_later(result.url_id)
        if final:
            self.flights.settle(flight, result.url_id)
        self._apply(result, final=final, packed=packed)
        if len(self._outcomes) >= _FLUSH_EVERY:
            self.flush()

    def _count(self, result: FetchResult) -> None:
        self.stats.on_result(result)
        if state_of(result) is UrlState.BLOCKED:
            self.stats.on_robots_blocked()

    def _apply(
        self, result: FetchResult, *, final: bool | None = None, packed: bytes = b"", position: Checkpoint | None = None
    ) -> None:
        """Turn one result into an outcome (and its links into discoveries). ``packed``: the body as the
        journal line holds it, LZ4-compressed, for the page store to keep without compressing again.
        ``position``: where a replayed result's journal line starts (its items may be written already)."""
        if final is None:
            final = is_final(result)  # a replay: retry-later results stay pending
        if not final:
            return  # comes back through the batch's unfinished list
        self._count(result)
        outcome = outcome_of(result, keep_body=self.settings.fetch.keep_body, packed=packed)
        if result.prepared is not None and result.prepared.parse_error and outcome.state is UrlState.DONE:
            outcome.error = result.prepared.parse_error  # a DONE row's error: the page stands, its links do not
            self.stats.on_parse_failed()
        if self.recrawl is not None:  # the next fetch (a 304 keeps the stored copy); sitemap finds first
            outcome, found = self.recrawl.after(result, outcome)
            self.frontier.add(self.seen.add_new(found))
        if self.page_items is not None:  # before the links: the plugins' pass gives them too
            self.page_items.apply(result, outcome, position=position)
            if outcome.state is UrlState.DONE:
                self.found.boosted_links_of(result)
        elif outcome.state is UrlState.DONE:
            self.found.links_of(result)
        if result.redirects:
            self.found.chain_of(result)
        self._outcomes.append(outcome)

    def flush(self) -> None:
        """Make every processed result durable and move the journal checkpoint past it."""
        self._flush_store()
        self.durable.checkpoint()
        if not self.redirects.in_flight() and self.hops.written:
            self.hops.clear()

    def _flush_store(self) -> None:
        self._outcomes.extend(self.found.publish())
        if self._outcomes:
            self.durable.record(self._outcomes)
            self._outcomes = []
