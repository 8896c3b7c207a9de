"""The crawl's side of re-crawling (issue #23): what CrawlCore asks when re-crawling is on.

- ``note_pending``: the revisit state of URLs read back from the pending set (due re-fetches), kept until
  their batch goes out so that ``decorate`` can give each task its validators (conditional GET).
- ``on_outcome``: a final result's outcome gets the URL's next re-crawl state (``pipeline.frontier.schedule``)
  from what the fetch saw (status, validators, content digest); a 304 or an unchanged body keeps the stored
  page (the outcome carries none: ``pipeline.frontier.versions.same_version``), so an unchanged re-fetch
  writes no body and no items.
- ``due``: at most every ``check_interval_s``, due URLs are moved back to the pending set by the store;
  the core adds them to the frontier. With ``work_conserving``, when fewer than ``WORK_AHEAD`` URLs per
  known host are pending, the URLs due soonest come back early, so the whole fetch budget is spent. A
  host is known once the crawl has leased a URL of it (``decorate`` sees every batch): in the fleet the
  nodes record the outcomes and the link jobs plan the re-fetches, so the dispatcher sees no outcome.
- the Poisson policy's per-host marginal value ``mu`` (``pipeline.frontier.hostrates``: a histogram of each
  host's URLs by estimated change rate, and the ``mu`` that makes the host's intervals spend its fetch
  budget, solved again at most every ``MU_EVERY_S`` of result time). Kept in memory here; the fleet's
  crawl-db update job keeps the same histogram in the crawl db and plans with the same function.
- ``stopped``: the continuous crawl's stop file exists.

Everything but ``due`` and ``stopped`` is a function of its arguments and the remembered revisits; the
clock is the caller's.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from fetchers.records import FetchResult, UrlTask
from pipeline.crawl.signalbook import SignalBook
from pipeline.crawl.sitemapfeed import SitemapFeed
from pipeline.frontier import hostrates, signals
from pipeline.frontier.hostrates import HostRates
from pipeline.frontier.observation import observe
from pipeline.frontier.schedule import RECRAWL_META, Change, Observation, Schedule
from pipeline.frontier.signals import validators_for
from pipeline.frontier.versions import replayed_prev, same_version
from pipeline.links.sitemaps import is_sitemap_like
from pipeline.settings import Settings
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Outcome, Revisit, Store, UrlRecord, UrlState
from pipeline.urls import Scope, host_of

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RevisitStats:
    """Counts of re-fetch outcomes, for the summary and the freshness bench."""

    scheduled: int = 0  # outcomes given a revisit state
    new: int = 0
    changed: int = 0
    unchanged: int = 0  # 200 with the stored copy's digest (or near-identical)
    not_modified: int = 0  # 304 without a body
    failed: int = 0
    requeued: int = 0  # due URLs moved back to the pending set
    conditional_sent: int = 0  # tasks that went out with validators
    unconditional_sent: int = 0  # re-fetches sent without (audits, hosts fetched with full or plain GETs)
    refetch_body_bytes: int = 0  # body bytes of re-fetches answered 200
    refetch_200: int = 0
    not_modified_wire_bytes: int = 0
    same_digest: int = 0  # unchanged re-fetches whose bytes were identical (a 304 would have done)

    def as_dict(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in self.__slots__}  # type: ignore[attr-defined]


STOP_CHECK_S = 0.2  # the stop file is looked for at most this often
WORK_AHEAD = 3  # work-conserving: URLs kept waiting per known host (a batch takes several)


class Recrawler:
    """Re-crawl bookkeeping for one crawl (see the module docstring)."""

    def __init__(
        self,
        cfg: RecrawlSettings,
        store: Store,
        *,
        simhash: Callable[[bytes, str], int] | None = None,
    ) -> None:
        self.cfg = cfg
        self.host_budget_rps = cfg.host_budget_rps  # 0: uniform revisiting's (pipeline.frontier.hostrates)
        self._hosts: dict[str, HostRates] = {}
        self._known: set[str] = set()  # hosts of every batch leased: the work-conserving rule's hosts
        self.schedule = Schedule(cfg)
        self.sitemap_schedule = self.schedule.for_sitemaps()
        self.store = store
        self.continuous = cfg.continuous
        if simhash is None and cfg.simhash_bits > 0:
            simhash = _text_simhash
        self._simhash = simhash if cfg.simhash_bits > 0 else None
        self.sitemaps: SitemapFeed | None = None
        self._prev: dict[int, Revisit] = {}  # url_id -> stored revisit, for URLs in the frontier or in flight
        self._checked = float("-inf")
        self._stop_checked, self._stop_seen = float("-inf"), False
        self.stats = RevisitStats()
        self.signals = SignalBook(store)
        # The fleet's crawl-db update job schedules what fetch nodes recorded by these same settings.
        store.put_meta(RECRAWL_META, json.dumps(dataclasses.asdict(cfg)))

    @classmethod
    def of(
        cls, settings: Settings, store: Store, scope: Scope, clock: Callable[[], float]
    ) -> Recrawler | None:
        """The crawl's re-crawling (with its sitemaps feed when ``recrawl.sitemaps``), or None when off."""
        rc = settings.recrawl
        if not rc.on:
            return None
        out = cls(rc, store)
        if rc.sitemaps:
            out.sitemaps = SitemapFeed(scope, store, schedule=out.schedule, clock=clock)
        return out

    def halted(self) -> bool:
        """A continuous crawl whose stop file exists: no new batch."""
        return self.continuous and self._stopped_lately()

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {"recrawl": self.stats.as_dict()}
        if self.sitemaps is not None:
            out["sitemaps"] = self.sitemaps.summary()
        if self.cfg.signal_trust:
            out["signals"] = self.signals.summary()
        return out

    def pending(self, host: str, limit: int, *, refetches_only: bool = False) -> list[UrlRecord]:
        """``store.pending``, remembering the revisit state of the URLs read (for ``decorate``)."""
        records = self.store.pending(host, limit, refetches_only=refetches_only)
        self.note_pending(records)
        return records

    def after(self, result: FetchResult, outcome: Outcome) -> tuple[Outcome, list[UrlRecord]]:
        """``on_outcome``, plus the URLs the sitemaps feed found in ``result`` (to add before the outcome)."""
        outcome, _ = self.on_outcome(result, outcome)
        return outcome, self.sitemaps.on_result(result) if self.sitemaps is not None else []

    # --- the pending set --------------------------------------------------------------------------
    def note_pending(self, records: Iterable[UrlRecord]) -> None:
        for r in records:
            if r.revisit is not None:
                self._prev[r.url_id] = r.revisit

    def note_replayed(self, result: FetchResult) -> None:
        """Before ``result``, read back from the journal on resume, is applied again: note the re-crawl state
        its fetch is compared with, as the refill that leased it noted it (``versions.replayed_prev``), so
        that an unchanged re-fetch writes no second item set and the URL's estimates go on from its state."""
        stored = self.store.get_revisit(result.url)
        page_at = None
        if stored is not None and stored.fetched_at >= result.fetched_at:  # applied before the kill
            page = self.store.get_page(result.url)
            page_at = page.fetched_at if page is not None else None
        prev = replayed_prev(stored, page_at, result.fetched_at)
        if prev is None:
            self._prev.pop(result.url_id, None)
        else:
            self._prev[result.url_id] = prev

    def decorate(self, tasks: Sequence[UrlTask]) -> None:
        """Note the tasks' hosts as known (``due``), and give re-fetched tasks their stored validators
        (when conditional GET is on), as their host's record says (``pipeline.frontier.signals``: none for
        a host whose 304s hid changes or that ignores validators, none on an audit;
        ``recrawl.signal_trust = false``: always)."""
        if self.cfg.work_conserving:
            self._known.update(host_of(t.url) for t in tasks)
        if not self.cfg.conditional_get or not self._prev:
            return
        trust = self.cfg.signal_trust
        for t in tasks:
            prev = self._prev.get(t.url_id)
            if prev is None or not (prev.etag or prev.last_modified):
                continue
            if trust:
                t.etag, t.last_modified = validators_for(prev, self.signals.of(host_of(t.url)))
            else:
                t.etag, t.last_modified = prev.etag, prev.last_modified
            if t.etag or t.last_modified:
                self.stats.conditional_sent += 1
            else:
                self.stats.unconditional_sent += 1

    def due(
        self, now: float, *, backlog: int = 0, host_backlog: Callable[[str], int | None] | None = None
    ) -> dict[str, int]:
        """Due URLs moved back to the pending set (per host), at most every ``check_interval_s``.

        The budget rule: re-fetches and new URLs share one frontier, one politeness and one fetch budget.
        While ``backlog`` (URLs already pending) is below ``requeue_batch``, up to ``requeue_batch`` due URLs
        come back per check; above it, only ``recrawl_share`` of that, so a flood of due URLs cannot starve
        the discovery of new ones, nor new URLs freeze the collection. Politeness never bends: both kinds
        wait for their host's turn alike.

        Work-conserving (``work_conserving``): each known host with fewer than ``WORK_AHEAD`` URLs waiting
        (``host_backlog``; None: a host this process no longer holds, handed to another dispatcher shard)
        gets its URLs due soonest back early, so no host's turn goes unused while another's queue is long."""
        if now - self._checked < self.cfg.check_interval_s:
            return {}
        self._checked = now
        cap = self.cfg.requeue_batch
        if backlog >= cap:
            cap = int(cap * self.cfg.recrawl_share)
        hosts = self.store.requeue_due(now, cap)
        if self.cfg.work_conserving and self._known:
            busy = host_backlog or (lambda _h: 0)
            idle = {h: WORK_AHEAD - b - hosts.get(h, 0) for h in self._known if (b := busy(h)) is not None}
            idle = {h: n for h, n in idle.items() if n > 0}
            if idle:
                early = self.store.requeue_due(now + self.cfg.max_interval_s, sum(idle.values()), hosts=idle)
                for host, n in early.items():
                    hosts[host] = hosts.get(host, 0) + n
        self.stats.requeued += sum(hosts.values())
        return hosts

    def stopped(self) -> bool:
        self._stop_seen = self._stop_seen or (bool(self.cfg.stop_file) and Path(self.cfg.stop_file).exists())
        return self._stop_seen

    def _stopped_lately(self) -> bool:
        """``stopped``, looked up at most every ``STOP_CHECK_S``: asked before every batch, a stat each
        time was the busiest system call of a continuous crawl."""
        now = time.monotonic()
        if not self._stop_seen and now - self._stop_checked >= STOP_CHECK_S:
            self._stop_checked = now
            self.stopped()
        return self._stop_seen

    # --- results ----------------------------------------------------------------------------------
    def on_outcome(self, result: FetchResult, outcome: Outcome) -> tuple[Outcome, Change | None]:
        """``outcome`` with the URL's next re-crawl state; robots refusals are not scheduled."""
        prev = self._prev.pop(result.url_id, None)
        if outcome.state not in (UrlState.DONE, UrlState.FAILED):
            return outcome, None
        # A page whose parse killed parser processes is not parsed here either: exact digest only.
        hostile = result.prepared is not None and bool(result.prepared.parse_error)
        simhash = None if hostile else self._simhash
        if simhash is not None and result.prepared is not None and result.prepared.simhash:
            simhash = _given(result.prepared.simhash)  # a parse or fetch process computed it already
        obs = observe(result, simhash=simhash)
        host = host_of(result.url)
        rates = self._hosts.get(host)
        if rates is None:
            rates = self._hosts[host] = HostRates()
            self._known.add(host)  # a result replayed on resume: its host was leased by the killed process
        schedule = self.sitemap_schedule if is_sitemap_like(result.url, result.content_type) else self.schedule
        change, revisit = hostrates.plan(
            schedule, rates, prev, obs, url=result.url, host=host, budget_rps=self.host_budget_rps
        )
        if self.cfg.signal_trust:
            revisit = self._signals(result, obs, prev, change, revisit, host)
        self._count(change, result, prev)
        page = outcome.page
        if same_version(prev, obs):  # pipeline.frontier.versions, as the fleet's extract job asks it
            page = None  # the stored copy stands; nothing to write (a near-duplicate's new bytes are kept)
            if change is Change.UNCHANGED:
                self.stats.same_digest += 1
        state = outcome.state
        if change is Change.NOT_MODIFIED:
            state = UrlState.DONE
        return replace(outcome, page=page, state=state, revisit=revisit), change

    def _signals(
        self, result: FetchResult, obs: Observation, prev: Revisit | None, change: Change, revisit: Revisit, host: str
    ) -> Revisit:
        """Count the result into its host's record; a page its trusted sitemap lists waits for its lastmod."""
        asked = self.sitemaps.take_asked(result.url) if self.sitemaps is not None else False
        record = self.signals.counted(host)
        signals.observe(record, prev, status=obs.status, etag=obs.etag, last_modified=obs.last_modified,
                        digest=obs.digest, changed=change is Change.CHANGED, lastmod_asked=asked)  # fmt: skip
        if record.skips and self.sitemaps is not None and self.sitemaps.dated(result.url):
            _, high = self.schedule.bounds(result.url, host)
            return replace(revisit, next_fetch=max(revisit.next_fetch, obs.fetched_at + high))
        return revisit

    def host_mu(self, host: str) -> float | None:
        """The host's current ``mu`` (for the summary and tests)."""
        rates = self._hosts.get(host)
        return rates.mu if rates is not None else None

    def _count(self, change: Change, result: FetchResult, prev: Revisit | None) -> None:
        s = self.stats
        s.scheduled += 1
        setattr(s, change.value, getattr(s, change.value) + 1)
        if prev is not None and result.status == 200:
            s.refetch_200 += 1
            s.refetch_body_bytes += result.body_bytes
        if change is Change.NOT_MODIFIED:
            s.not_modified_wire_bytes += result.wire_bytes


def _given(value: int) -> Callable[[bytes, str], int]:
    return lambda _body, _ctype: value


def _text_simhash(body: bytes, content_type: str) -> int:
    """The near-duplicate signature of a page's visible text (``pipeline.links.change``), imported only
    when ``recrawl.simhash_bits`` asks for it."""
    from pipeline.links.change import text_simhash

    return text_simhash(body, content_type)
