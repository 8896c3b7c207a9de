"""``crawlfleet links``: the fleet's link processing, on the crawl's path (S3 step 4, the design card).

Fetch nodes write closed segments at the crawl's segments URI (``pipeline.storage.segments``: a directory,
``hdfs://`` or ``s3://``). This service takes them in micro-batches (**rounds**) through the mrjob link
jobs on any runner (extract -> filter -> S5 dedup -> update the crawl db and the pending set in the store),
tells the dispatcher which segments are done and how many new PENDING URLs each host gained (a ``links``
message on the service's results queue), and only then retires the segments (deleted, or kept under
``.done/`` for ``fleet.segment_retention_s``: the pages themselves are in the store).

Any number of these services may run for one crawl, on any machines: rounds, claims and the merge order
live in the crawl's store (``linkrounds.RoundBook``), so no segment is merged twice, and a round whose
process was killed is taken over once its lease expires and run again under the same merge id (the store
counts each in-link once per merge id).

Pipelined rounds: the next round's extract job runs in a worker process while this one merges into the
store, so extraction (CPU) overlaps the merge (store round trips). Merges go one at a time across every
service (``RoundBook.merge_lease``). Why the worker is a process of its own: ``pipeline.transport.links.worker``.

The crawl's link rules (domains, depth) come from the store, where the dispatcher put them
(``RULES_KEY``), so the jobs always filter as the crawl that fed them would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from jobs.jobrun import JobOutput
from jobs.logic import open_store
from jobs.runner import LinkPipeline, RoundResult
from jobs.runnerconfig import CLUSTER_RUNNERS, RunnerConfig
from jobs.sparkapp import SparkRounds
from pipeline.storage.base import Store
from pipeline.storage.leases import Lease, LeaseKeeper, Leases
from pipeline.storage.segments import Segments
from pipeline.transport.links.quarantine import LinkQuarantine
from pipeline.transport.links.rounds import Held, Round, RoundBook
from pipeline.transport.links.rules import RULES_KEY, CrawlLinkRules
from pipeline.transport.links.worker import ExtractWorker
from pipeline.transport.wire.replies import LinksReport
from pipeline.urls import host_of

log = logging.getLogger(__name__)


ORPHANS_EVERY_S = 1.0  # an idle service looks for a dead service's rounds at most this often
ROUND_LINE = ("links round %d: %d segments, %d candidates, %d new pending on %d hosts in %.2fs "
              "(extract %.2fs, merge %.2fs; %d results, CPU extract %.3fs, merge %.3fs)")  # fmt: skip


def process_name() -> str:
    """This process as a lease owner: host, pid and a random tail (a restarted pid is another owner)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LinkJobsService:
    """Rounds of the link jobs until ``stop()``; ``publish(report)`` raises if the broker did not take it."""

    def __init__(
        self,
        *,
        segments: str,
        store: str,
        runner: RunnerConfig,
        publish: Callable[[LinksReport], None],
        max_segments: int = 256,
        # An idle service lists the segments this often (one LIST per node directory): None = 0.05 s on a
        # local file system (a hop of the link graph waits for it), 0.2 s on HDFS or S3 (requests).
        poll_s: float | None = None,
        lru_size: int = 200_000,
        batch_size: int = 500,
        sleep: Callable[[float], None] = time.sleep,
        parse_cpu_limit_s: float = 3.0,  # fetch.parse_cpu_limit_s: see links/quarantine.py
        parse_failed_per_host: int = 3,  # fetch.parse_failed_per_host
        lease_ttl_s: float = 60.0,  # fleet.link_lease_s: a killed service's rounds wait this long
        retention_s: float = 0.0,  # fleet.segment_retention_s: 0 delete merged segments, < 0 keep them
        owner: str = "",
        clock: Callable[[], float] = time.time,  # wall clock of the leases (injected by tests)
        extract: Callable[..., JobOutput] | None = None,  # None: extract jobs run in a worker process
    ) -> None:
        self.segments = Segments(segments)
        self.store_spec = store
        self.runner = runner
        self.quarantine = LinkQuarantine(runner.work_dir / "guard", store=store, cpu_limit_s=parse_cpu_limit_s,
                                         host_limit=parse_failed_per_host)  # fmt: skip
        self.publish = publish
        self.max_segments = max_segments
        self.poll_s = poll_s if poll_s is not None else (0.05 if self.segments.local else 0.2)
        self.lru_size, self.batch_size = lru_size, batch_size
        self.sleep = sleep
        self.lease_ttl_s = lease_ttl_s
        self.retention_s = retention_s
        self.owner = owner or process_name()
        self.clock = clock
        self.worker = ExtractWorker(extract)
        self.rounds = 0
        self.segments_done = 0
        self.new_pending = 0
        self.failures = 0
        self.taken_over = 0
        self._pipeline: LinkPipeline | None = None
        self._store: Store | None = None
        self._book: RoundBook | None = None
        self._next: Held | None = None  # the round being extracted
        self._merge: Held | None = None  # the round to merge (extracted; or again, after a failed merge)
        self._last_expiry = 0.0
        self._next_orphans = 0.0  # when (self.clock) to look for a dead service's rounds next
        # On Spark, one application for every round (jobs/sparkapp.py), made at the first round.
        self._spark: SparkRounds | None = None

    @property
    def book(self) -> RoundBook:
        if self._book is None:
            self._store = open_store(self.store_spec)
            leases = Leases(self._store, owner=self.owner, ttl_s=self.lease_ttl_s, clock=self.clock)
            self._book = RoundBook(self._store, leases)
        return self._book

    def rules(self) -> CrawlLinkRules | None:
        """The crawl's link rules, or None before its dispatcher has started (never creates the store)."""
        if self.store_spec.startswith("sqlite:") and not Path(self.store_spec.removeprefix("sqlite:")).exists():
            return None
        text = self.book.store.get_meta(RULES_KEY)
        return CrawlLinkRules.from_json(text) if text else None

    def run(self, stop: Callable[[], bool]) -> dict[str, Any]:
        """Rounds until ``stop()``. A failed round (the store or the broker away, a job that died) is
        logged and tried again after a back-off: its segments are still claimed by it, and running them
        again adds nothing twice."""
        backoff = self.poll_s
        try:
            while not stop():
                try:
                    did = self._step()
                    backoff = self.poll_s
                    if not did:
                        self.sleep(self.poll_s)
                except Exception:
                    log.exception("links: round failed; trying again in %.1fs", backoff)
                    self.failures += 1
                    if self._next is None:  # no extract task running: markers left are dead tasks'
                        self.quarantine.blame()
                    self.sleep(backoff)
                    backoff = min(30.0, backoff * 2)
        finally:
            self.close()
        return {"rounds": self.rounds, "segments": self.segments_done, "new_pending": self.new_pending,
                "failures": self.failures, "quarantined": self.quarantine.quarantined,
                "taken_over": self.taken_over}  # fmt: skip

    # --- one step: extract the next round while merging the last -------------------------------------
    def _step(self) -> bool:
        if self._pipeline is None:
            rules = self.rules()
            if rules is None:  # the dispatcher has not started this crawl yet
                return False
            args = self.quarantine.job_args(
                rules.job_args(store=self.store_spec, batch_size=self.batch_size, lru_size=self.lru_size))
            self._pipeline = LinkPipeline(self.runner, args)
        self._keep_leases()
        if self.runner.runner in CLUSTER_RUNNERS:
            return self._cluster_step()
        if self._merge is None:
            if self._next is None:
                self._next = self._start_extract()
                if self._next is None:
                    self._expire_done()
                    return False
            held, self._next = self._next, None
            try:
                held.extracted = self._wait(held)
            except BaseException as exc:
                if isinstance(exc, BrokenProcessPool):
                    self.worker.close()
                with contextlib.suppress(Exception):  # free at once: the next step takes it again (orphans)
                    self.book.leases.release(held.lease)
                raise
            self._merge = held
            self._next = self._start_extract()  # overlaps the merge below
        return self._merge_held()

    def _start_extract(self) -> Held | None:
        assert self._pipeline is not None
        taken = self._take_round()
        if taken is None:
            return None
        held = Held(*taken, started=time.monotonic())
        held.future = self.worker.submit(self._uris(held.round), self._pipeline.args.extract(), self._pipeline.cfg)
        return held

    def _wait(self, held: Held) -> JobOutput:
        """The extract job's output, renewing the leases held while it runs."""
        assert held.future is not None
        while True:
            try:
                return held.future.result(timeout=max(1.0, self.lease_ttl_s / 4))
            except FutureTimeout:
                self._keep_leases()

    def _take_round(self) -> tuple[Round, Lease] | None:
        """A dead service's round (run again as it was), else a new one over closed segments no round has
        claimed; None when there is nothing to do."""
        book = self.book
        mine = {h.round.id for h in (self._next, self._merge) if h is not None}
        if self.clock() >= self._next_orphans:  # a dead service's rounds wait out a lease anyway
            self._next_orphans = self.clock() + ORPHANS_EVERY_S
            for rid in book.orphans():
                if rid in mine:
                    continue
                taken = book.take_over(rid)
                if taken is not None:
                    self.taken_over += 1
                    log.warning("links: took over round %s (%d segments) from a service that stopped",
                                rid, len(taken[0].segments))  # fmt: skip
                    return taken
        closed = self.segments.closed(now=time.time())
        if not closed:  # an idle poll: one listing, no store round trip
            return None
        claimed = book.claims()
        todo = [s.key for s in closed if s.key not in claimed]
        return book.open(todo[: self.max_segments]) if todo else None

    def _cluster_step(self) -> bool:
        """On a cluster runner a round is one job, extract and merge chained there (``run_round``): it runs
        under the merge lease, after any merge a dead service left unfinished; False when there was nothing
        to do or another service is merging now."""
        book = self.book
        merge = book.merge_lease()
        if merge is None:
            return False
        try:
            for rid in book.merging():
                taken = book.take_over(rid)
                if taken is None:
                    return False  # its owner may still be alive: its merge id comes first, so wait
                self.taken_over += 1
                merge = self._cluster_round(Held(*taken, started=time.monotonic()), merge)
            taken = self._take_round()
            if taken is None:
                return False
            self._cluster_round(Held(*taken, started=time.monotonic()), merge)
            return True
        finally:
            book.leases.release(merge)

    def _cluster_round(self, held: Held, merge: Lease) -> Lease:
        """Run one round as one job (extract and merge on the cluster); the merge lease back."""
        assert self._pipeline is not None
        rnd = self.book.begin_merge(held.round, held.lease)
        if rnd is None:
            log.warning("links: round %s was taken over while this service paused; leaving it", held.round.id)
            return merge
        execute = None
        if self.runner.runner == "spark" and self.runner.spark_app == "long":
            self._spark = self._spark or SparkRounds(self.runner)
            execute = self._spark.run
        return self._keeping(held, rnd, merge, lambda uris: self._pipeline.run_round(  # type: ignore[union-attr]
            uris, name=f"round-{self.rounds}", round_id=rnd.mid, execute=execute))

    def _merge_held(self) -> bool:
        """Merge the extracted round under the fleet's merge lease (after any merge a dead service left
        unfinished); False when another service is merging now."""
        held = self._merge
        assert held is not None and held.extracted is not None and self._pipeline is not None
        book = self.book
        merge = book.merge_lease()
        if merge is None:
            return False
        try:
            for rid in book.merging():
                if rid == held.round.id:
                    continue
                taken = book.take_over(rid)
                if taken is None:
                    return False  # its owner may still be alive: its merge id comes first, so wait
                self.taken_over += 1
                other = Held(*taken, started=time.monotonic())
                other.extracted = self.worker.run_here(
                    self._uris(other.round), self._pipeline.args.extract(), self._pipeline.cfg)
                merge = self._merge_one(other, merge)
            merge = self._merge_one(held, merge)
            self._merge = None
            return True
        finally:
            book.leases.release(merge)

    def _merge_one(self, held: Held, merge: Lease) -> Lease:
        """Merge one extracted round, renewing its lease and the merge lease meanwhile; the merge lease back."""
        assert held.extracted is not None and self._pipeline is not None
        rnd = self.book.begin_merge(held.round, held.lease)
        if rnd is None:
            log.warning("links: round %s was taken over while this service paused; leaving it", held.round.id)
            return merge
        extracted = held.extracted
        return self._keeping(held, rnd, merge, lambda uris: self._pipeline.update(  # type: ignore[union-attr]
            uris, extracted, name=f"round-{self.rounds}", round_id=rnd.mid))

    def _keeping(self, held: Held, rnd: Round, merge: Lease, run: Callable[[list[str]], RoundResult]) -> Lease:
        """``run`` the round's merge with its lease and the merge lease renewed on a thread meanwhile, then
        report it; the merge lease back. A lease lost meanwhile fails the step (the new owner reports)."""
        with LeaseKeeper(lambda: open_store(self.store_spec), self.book.leases, [held.lease, merge]) as keeper:
            result = run(self._uris(rnd))
        lease, merge_now = keeper.current(held.lease), keeper.current(merge)
        if lease is None or merge_now is None:
            raise RuntimeError(f"links: lost a lease while round {rnd.id} merged; another service runs it")
        held.lease = lease
        self._report(rnd, lease, result, held.started)
        return merge_now

    def _uris(self, rnd: Round) -> list[str]:
        """URIs of the round's segments still there (a killed service may have retired some already)."""
        return [self.segments.uri(key) for key in rnd.segments if self.segments.exists(key)]

    def _report(self, rnd: Round, lease: Lease, result: RoundResult, started: float) -> None:
        hosts = Counter(rec["host"] for rec in result.new_pending)
        found_by = {rec["host"]: host_of(rec["source"]) for rec in result.new_pending if "//" in rec.get("source", "")}
        if not self.book.leases.valid(lease):
            renewed = self.book.leases.renew(lease)
            if renewed is None:
                log.warning("links: round %s lost its lease before its report; its new owner reports it", rnd.id)
                return
            lease = renewed
        self.publish(LinksReport(rnd.segments, dict(hosts), found_by=found_by))  # found_by: for dispatcher shards
        for key in rnd.segments:
            self.segments.retire(key, keep=self.retention_s != 0)
        self.segments_done += len(rnd.segments)
        self.book.forget(rnd, lease)
        self.rounds += 1
        self.new_pending += len(result.new_pending)
        # The round's time from its claim to this report, and the two jobs' parts of it (the rest is the
        # wait for the merge lease and the previous round's merge): read by ``bench fleet`` (fleetstats).
        log.info(ROUND_LINE, self.rounds, len(rnd.segments), result.candidates,
                 len(result.new_pending), len(hosts), time.monotonic() - started, result.extract_s,
                 result.update_s, result.pages, result.extract_cpu_s, result.update_cpu_s)  # fmt: skip

    def _keep_leases(self) -> None:
        """Renew the leases of the rounds held; a round whose lease was lost (paused past it) is dropped."""
        for attr in ("_next", "_merge"):
            held: Held | None = getattr(self, attr)
            if held is None or held.lease.until - self.clock() > self.lease_ttl_s / 2:
                continue
            renewed = self.book.leases.renew(held.lease)
            if renewed is None:
                log.warning("links: lost the lease of round %s; another service runs it", held.round.id)
                setattr(self, attr, None)
            else:
                held.lease = renewed

    def _expire_done(self) -> None:
        now = self.clock()
        if self.retention_s > 0 and now - self._last_expiry >= 60.0:
            self._last_expiry = now
            self.segments.expire_done(older_than=now - self.retention_s)

    def close(self) -> None:
        """Stop and reap the extract worker; the rounds held are released to other services."""
        self.worker.close(wait=True)
        if self._spark is not None:
            self._spark.close()
            self._spark = None
        for held in (self._next, self._merge):
            if held is not None and self._book is not None:
                with contextlib.suppress(Exception):
                    self._book.leases.release(held.lease)
        self._next = self._merge = None
        if self._pipeline is not None:
            with contextlib.suppress(Exception):  # the carried seen-cache, for the next service: a cache only
                self._pipeline.close()
        if self._store is not None:
            self._store.close()
            self._store = self._book = None
