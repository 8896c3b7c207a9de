"""CrawlCore: the transport-free crawl state machine shared by the embedded engine and the fleet.

It owns the frontier, the dispatcher, the seen-filter, the journal and the store, and knows nothing
of how batches travel. The embedded engine calls it from one asyncio loop; the fleet dispatcher
process calls it from its AMQP consumers. All methods are synchronous and must be called from one
thread.

How a result is journaled, applied and made durable, exactly once end to end (and replayed on resume):
results.py, a mixin of ``CrawlCore``. The batches in flight and their answered URLs: inflight.py. URLs
that join the pending set other than as links of results (seeds, submits, the link jobs' reports):
inputs.py, a mixin too.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fetchers.records import Batch, FetchResult, UrlTask
from pipeline.crawl.discoveries import Discoveries
from pipeline.crawl.durable import Durable
from pipeline.crawl.hopjournal import HopJournal
from pipeline.crawl.inflight import InFlight
from pipeline.crawl.inputs import PendingInputs
from pipeline.crawl.opening import frontier_limits, rebuild_from_store, store_seeds
from pipeline.crawl.pageitems import PageItems, items_dir
from pipeline.crawl.refills import Refills
from pipeline.crawl.results import ResultPath
from pipeline.crawl.revisits import Recrawler
from pipeline.dispatch.dispatcher import Dispatcher
from pipeline.dispatch.protocols import Heartbeat, Refusal
from pipeline.dispatch.quotas import Quotas, quota_line
from pipeline.dispatch.serials import SerialAllocator
from pipeline.frontier.answered import AnsweredFilter
from pipeline.frontier.dedup import SeenFilter
from pipeline.frontier.frontier import Admit, Frontier
from pipeline.frontier.seentable import FingerprintTable
from pipeline.observe.stats import CrawlStats
from pipeline.plugins.chain import PluginSet
from pipeline.settings import Settings
from pipeline.storage.base import Outcome, Store
from pipeline.storage.itemlog import ItemLog
from pipeline.urls import Scope, TrapRules

log = logging.getLogger(__name__)


class CrawlCore(PendingInputs, ResultPath):
    """Crawl state for one crawl directory. See the module docstring for the guarantees."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        seeds: Sequence[str],
        out_dir: Path,
        clock: Callable[[], float],
        stats: CrawlStats | None = None,
        resume: bool = False,
        quotas: Quotas | None = None,
        quota_share: Callable[[int], float | None] | None = None,
        write_behind: bool = False,
        outcomes_by_nodes: bool = False,
        background_refills: bool = False,
        plugins: PluginSet | None = None,
        on_items: Callable[[FetchResult], None] | None = None,
        admit: Admit | None = None,
    ) -> None:
        self.settings = settings
        # Plugins (pipeline/plugins): each page's items into the crawl's item log (pipeline/crawl/pageitems.py).
        log_ = None if plugins is None else ItemLog(items_dir(settings, out_dir), max_bytes=settings.plugins.items_file_bytes,
                                                     fmt=settings.plugins.items_format)  # fmt: skip
        self.durable = Durable(settings, store, out_dir, write_behind=write_behind, items=log_)
        self.page_items = None if plugins is None or log_ is None else PageItems(settings, plugins, log_, on_items)
        self.store = store = self.durable.store  # behind a lock with write-behind
        self.journal = self.durable.journal
        self.clock, self.out_dir, self.stats = clock, out_dir, stats or CrawlStats()
        self.service = settings.dispatch.service
        seeds = store_seeds(store, seeds, resume=resume)
        sc = settings.scope
        self.scope = Scope.build(
            seeds, allowed_domains=sc.allowed_domains, allow_regex=sc.allow_regex, deny_regex=sc.deny_regex
        )
        self.traps = TrapRules(sc.max_url_length, sc.max_path_depth, sc.max_repeated_segments)
        self.frontier = Frontier(frontier_limits(settings), admit=admit)  # admit: a dispatcher shard's hosts only
        self.flights = InFlight()  # batches out, their answered URLs, retry-later counts (inflight.py)
        # With fleet nodes recording outcomes themselves, a node may die after storing a batch and
        # before its reply arrives: the re-queue of that batch checks the store first.
        settled = self.durable.settled if outcomes_by_nodes else None
        self.dispatcher = Dispatcher(
            settings.dispatch,
            frontier=AnsweredFilter(self.frontier, self.flights.answered, settled=settled),
            quotas=quotas or Quotas.unlimited(),
            serials=SerialAllocator(store.reserve_serials),
            clock=clock,
            quota_share=quota_share,  # a dispatcher shard's part of each minute's budget (dispatch/quotashares.py)
        )
        st = settings.store
        table = FingerprintTable(max_entries=st.seen_table_max_urls) if st.seen_table_max_urls > 0 else None
        # In-links are what the frontier's priority orders by; counting them costs a write per known URL.
        self.seen = SeenFilter(store, lru_size=st.seen_lru_size, table=table,
                               track_inlinks=settings.dispatch.priority == "inlinks")  # fmt: skip
        # What results add besides their outcomes: links, and the URLs of redirect chains, whose targets
        # go through the seen-set and scope like links (pipeline/crawl/discoveries.py, redirects.py).
        self.found = Discoveries(settings, store, self.seen, self.frontier, self.stats, self.scope, self.traps)  # fmt: skip
        self.redirects = self.found.redirects
        self.hops = HopJournal(out_dir / "redirect-hops.jsonl")  # a kill between hops costs the one in flight
        self.redirects.on_hop = self.hops.hop
        self._outcomes: list[Outcome] = []
        self.dropped_results = 0
        # Re-crawling and sitemaps (issue #23, pipeline/crawl/revisits.py); None in a one-shot crawl.
        self.recrawl = Recrawler.of(settings, self.store, self.scope, clock)
        # Refills read on a thread of their own when asked and the store can (pipeline/crawl/refills.py); a
        # re-crawl reads in line (its reads note validators).
        many = getattr(store, "pending_many", None) if background_refills and self.recrawl is None else None
        self.refiller = Refills(self.frontier, (self.recrawl or self.store).pending, read_many=many)
        if resume:
            self._resume()
        self._add_seeds(seeds)

    # --- start-up ----------------------------------------------------------------------------------
    def _resume(self) -> None:
        """Replay the journal past the last checkpoint (results.py), then rebuild the frontier from the store."""
        replayed = self._replay()
        rebuild_from_store(self.store, self.seen, self.frontier)
        # A re-crawl's URLs due now come back before the first batch: a run that starts with nothing
        # pending would otherwise end at once, before tick() looked (it found them only as it closed).
        self._requeue_due()
        log.info("resume: replayed %d journaled results, %d URLs pending", replayed, self.frontier.pending)

    # --- dispatch ----------------------------------------------------------------------------------
    def register_fetcher(self, fetcher_id: str, *, address: str = "") -> None:
        """(Re-)register a fetcher; a re-registration expires what its previous incarnation held."""
        self.dispatcher.register(fetcher_id, address=address)
        self._sync_inflight()

    def _sync_inflight(self) -> None:
        """Forget batches the dispatcher no longer has outstanding (expired by death, lease or restart)."""
        live = {b.serial for b in self.dispatcher.outstanding()}
        self.redirects.release(self.flights.keep_only(live))  # the unanswered ones were re-queued

    def next_batch(self, fetcher_id: str) -> Batch | None:
        """A batch for an idle fetcher, or None when nothing may be dispatched to it now."""
        limit = self.settings.scope.max_pages
        if limit and self.flights.issued >= limit:
            return None
        if self.recrawl is not None and self.recrawl.halted():
            return None  # the stop file: no new batch, the crawl ends once those in flight are back
        if self.found.buffered and self.frontier.pending == 0:
            self._flush_store()  # the frontier is starved: publish buffered discoveries now
        self._refill()
        left = limit - self.flights.issued if limit else None
        offered = self.dispatcher.offer(fetcher_id, self.service, limit=left)
        if isinstance(offered, Refusal):
            if offered.reason == "quota":
                self.stats.on_quota_refusal(self.service, offered.reason)
            return None
        if self.recrawl is not None:
            self.recrawl.decorate(offered.tasks)  # conditional GET for re-fetches
        self.flights.open(offered)
        return offered

    def _refill(self) -> None:
        # A released host's finished URLs must be DONE in the store before its pending rows are read, and
        # outcomes still on the writer's queue are skipped (the store shows those URLs PENDING).
        self.refiller.run(flush=self._flush_store, done_ids=self.durable.unapplied_ids)

    # --- batches -----------------------------------------------------------------------------------
    def on_batch_done(
        self,
        serial: int,
        *,
        fetcher_id: str,
        pages: int,
        elapsed_s: float,
        host_delays: Mapping[str, float] | None = None,
        host_ips: Mapping[str, str] | None = None,
        unfinished: Sequence[UrlTask] = (),
    ) -> bool:
        """Close a batch: release its hosts and requeue what it left undone.

        Results are not flushed here (a commit per batch costs more than the batch's parsing); the
        refill contract is kept by ``_refill``, which flushes before it reads the store.
        """
        if host_ips:
            self.frontier.note_ips(host_ips)
        accepted = self.dispatcher.complete(
            serial,
            fetcher_id=fetcher_id,
            pages=pages,
            elapsed_s=elapsed_s,
            host_delays=dict(host_delays or {}),
            unfinished=list(unfinished),
        )
        self.flights.close(serial, given_back=len(unfinished) if accepted else 0)
        return accepted

    def on_host_done(self, serial: int, *, fetcher_id: str, host: str, delay_s: float, ip: str = "") -> bool:
        """End the lease of one host of batch ``serial`` before the batch ends: every URL the batch had
        for it has a final result (already passed to ``on_result``). False when the batch is not in
        flight for ``fetcher_id`` or the host not leased to it; nothing changes then.

        The refill contract holds as at the batch's end: a refill flushes first, and the writer's
        unapplied outcomes are skipped (see ``_refill``).
        """
        flight = self.flights.get(serial)
        if flight is None or flight.batch.fetcher_id != fetcher_id:
            return False
        return self.frontier.release_host(fetcher_id, host, self.clock(), delay_s=delay_s, ip=ip)

    def on_heartbeat(self, hb: Heartbeat) -> None:
        self.dispatcher.heartbeat(hb)

    def tick(self) -> dict[str, Any] | None:
        """Liveness and stats; returns a stats row once per second (for stats.jsonl)."""
        self.dispatcher.tick()
        self._requeue_due()
        self._sync_inflight()
        self.flush()  # bounds what a replay has to redo to about one second of results
        self.stats.set_queue(self.frontier.pending)
        return self.stats.tick()

    def _requeue_due(self) -> None:
        """A re-crawl's due URLs back into the pending set (at most every ``recrawl.check_interval_s``)."""
        if self.recrawl is not None:
            due = self.recrawl.due(self.clock(), backlog=self.frontier.pending, host_backlog=self._host_backlog)
            for host, count in due.items():
                self.frontier.add_pending(host, count, refetch=True)

    def _host_backlog(self, host: str) -> int | None:
        """URLs of ``host`` waiting for a lease (the work-conserving re-crawl keeps a few per host, so the
        host's next lease finds some while its current batch is still out); None when the frontier does
        not hold the host (a dispatcher shard handed it on: its re-fetches are the new owner's)."""
        hs = self.frontier.host(host)
        return None if hs is None else hs.pending

    # --- status ------------------------------------------------------------------------------------
    def done(self) -> bool:
        """True when nothing is pending, leased or in flight (or the page limit is reached)."""
        if self.flights:
            return False
        if self.found.buffered or self._outcomes:
            self._flush_store()  # buffered discoveries may still hold work
        limit = self.settings.scope.max_pages
        if limit and self.flights.issued >= limit:
            return True
        if self.recrawl is not None and self.recrawl.continuous:
            # Waits for due URLs until stopped; what is pending stays for --resume.
            return self.recrawl.stopped()
        return self.frontier.pending == 0 and self.frontier.leased == 0 and not self.frontier.wants_refill(1)

    @property
    def in_flight(self) -> int:
        return len(self.flights)

    def summary(self) -> dict[str, Any]:
        out = dict(self.stats.summary())
        out["results_dropped"] = self.dropped_results
        out["quota"] = quota_line(self.settings.dispatch.quotas_file, self.dispatcher.quota_of(self.service))
        if self.recrawl is not None:
            out.update(self.recrawl.summary())
        out["store"] = self.store.counts()
        if self.page_items is not None:
            out["items"] = self.page_items.summary()
        out["dedup"] = dataclasses.asdict(self.seen.stats)
        out["frontier"] = {"refills": sum(self.refiller.counts), "refills_past_window": self.refiller.counts[1],
                           "activations": self.frontier.at_work.activations,
                           "hosts_capped": self.frontier.capped_hosts(),
                           "background_reads": self.refiller.reader.reads if self.refiller.reader else 0}  # fmt: skip
        return out

    def close(self) -> None:
        self.refiller.close()
        self.seen.flush()  # buffered in-link increments: advisory (priority), so after the last links
        self.flush()
        self.hops.close()
        self.durable.close()
