"""``crawlfleet links``: the fleet's link processing, on the crawl's path (S3 step 4, the design card).

Fetch nodes write one closed segment per batch (nodesink.py). This service takes the closed segments
in micro-batches through the mrjob link jobs on any runner (extract -> filter -> S5 dedup -> update
the crawl db and the pending set in the store), then tells the dispatcher which segments are done
and how many new PENDING URLs each host gained (a ``links`` message on the service's results queue),
and only then moves the segments under ``SEGMENTS/.done/``.

Exactly once: a killed service leaves its round's segments where they were, and the next round runs
them again. The store adds a URL once, so a second run finds nothing new; the dispatcher, which may
then never hear of URLs the first run added, re-reads the pending set from the store before it
declares the crawl done (``CrawlCore.restore_pending``). In-link counts too: before a round starts, its
id and segments are written to ``SEGMENTS/.rounds/ID.json`` (``RoundBook``); a restarted service runs the
rounds it finds there first, with their own ids and segments, and the store skips every URL whose
in-links the round has already counted (``LinkPipeline.update``'s ``round_id``).

Pipelined rounds (#18 point 7): the next round's extract job runs in a worker process while this one
merges into the store, so extraction (CPU) overlaps the merge (store round trips) and the pending set is
fed a round every merge instead of every extract + merge. Merges stay one at a time (in-link counts are
read-then-put). The worker is a process, not a thread: mrjob's inline runner changes the working
directory and ``sys.stdout`` of the process it runs in.

The crawl's link rules (domains, depth) come from the store, where the dispatcher put them
(``RULES_KEY``), so the jobs always filter as the crawl that fed them would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.logic import open_store
from jobs.runner import JobOutput, LinkPipeline, RoundResult, RunnerConfig, extract_links
from pipeline.settings import Settings
from pipeline.transport.linkquarantine import GUARD_DIR, LinkQuarantine
from pipeline.transport.linkrules import RULES_KEY, CrawlLinkRules
from pipeline.transport.nodesink import ABANDON_S, PART_SUFFIX, SEGMENT_SUFFIX, adopt_part
from pipeline.transport.replies import LinksReport

log = logging.getLogger(__name__)

DONE_DIR = ".done"
ROUNDS_DIR = ".rounds"


def segment_key(path: Path | str) -> str:
    """A segment's name as every process agrees on it, whatever its mount point: ``NODE/FILE``."""
    p = Path(path)
    return f"{p.parent.name}/{p.name}"


def closed_segments(root: Path, *, now: float | None = None) -> list[Path]:
    """Closed, unprocessed segments under ``root`` (``NODE/*.jsonl``), oldest first. A ``.part`` older
    than ABANDON_S (its node died and never came back) is adopted first."""
    if now is not None and root.is_dir():
        for part in root.glob(f"*/*{SEGMENT_SUFFIX}{PART_SUFFIX}"):
            if part.parent.name != DONE_DIR and now - part.stat().st_mtime >= ABANDON_S:
                adopt_part(part)
    found = [
        seg
        for node in root.iterdir()
        if node.is_dir() and node.name not in (DONE_DIR, ROUNDS_DIR, GUARD_DIR)
        for seg in node.glob(f"*{SEGMENT_SUFFIX}")
    ] if root.is_dir() else []  # fmt: skip
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))


@dataclass(frozen=True, slots=True)
class Round:
    """A micro-batch: its id (tags its in-link counts in the store) and its segments (``segment_key``s)."""

    id: str
    segments: tuple[str, ...]


def round_id(ns: int) -> str:
    """A round id that sorts by ``ns`` (wall-clock nanoseconds), in the form ``hbase_inlinks.ordered`` takes
    for ids that sort in merge order; a random tail keeps two services' ids apart."""
    return f"r{ns:020d}{uuid.uuid4().hex[:8]}"


class RoundBook:
    """Rounds written down before they run (``ROOT/.rounds/ID.json``), so a killed service runs each again
    under the same id and with the same segments; ``close`` forgets a round once its segments are done."""

    def __init__(self, root: Path) -> None:
        self.dir = root / ROUNDS_DIR
        self._last = 0

    def open(self, segments: list[Path]) -> Round:
        """Write a new round down. Ids sort in the order rounds open (and so merge): the store's blind in-link
        cells need that (``hbase_inlinks``). They are the wall clock in ns, past every id this book holds or
        made, so a clock stepped back cannot sort a round before an earlier one; a random tail keeps two
        books' ids apart. The form is ``hbase_inlinks.ordered``'s."""
        held = [int(p.stem[1:21]) for p in self.dir.glob("r*.json") if p.stem[1:21].isdigit()] if self.dir.is_dir() else []
        self._last = max(time.time_ns(), self._last + 1, *(t + 1 for t in held))
        rnd = Round(round_id(self._last), tuple(segment_key(s) for s in segments))
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f"{rnd.id}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"id": rnd.id, "segments": list(rnd.segments), "t": time.time()}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.dir / f"{rnd.id}.json")  # whole or absent: a torn manifest is never read
        return rnd

    def unfinished(self) -> list[Round]:
        """Rounds written down and not closed, oldest first (a manifest that cannot be read is skipped:
        ``open`` never leaves one, so it is not ours)."""
        found: list[tuple[float, Round]] = []
        for path in self.dir.glob("*.json") if self.dir.is_dir() else ():
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
                found.append((float(obj["t"]), Round(str(obj["id"]), tuple(str(k) for k in obj["segments"]))))
            except (OSError, ValueError, KeyError, TypeError):
                log.warning("links: unreadable round manifest %s left alone", path)
        return [rnd for _, rnd in sorted(found, key=lambda item: item[0])]

    def close(self, rnd: Round) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.dir / f"{rnd.id}.json")


def mark_done(root: Path, segment: Path) -> None:
    target = root / DONE_DIR / segment.parent.name
    target.mkdir(parents=True, exist_ok=True)
    os.replace(segment, target / segment.name)


class LinkJobsService:
    """Rounds of the link jobs until ``stop()``; ``publish(report)`` raises if the broker did not take it."""

    def __init__(
        self,
        *,
        segments: Path,
        store: str,
        runner: RunnerConfig,
        publish: Callable[[LinksReport], None],
        max_segments: int = 256,
        poll_s: float = 0.2,  # an idle service lists the segment directories this often (cheap)
        lru_size: int = 200_000,
        batch_size: int = 500,
        sleep: Callable[[float], None] = time.sleep,
        parse_cpu_limit_s: float = 3.0,  # fetch.parse_cpu_limit_s: see linkquarantine.py
        parse_failed_per_host: int = 3,  # fetch.parse_failed_per_host
    ) -> None:
        self.segments = segments
        self.quarantine = LinkQuarantine(segments, store=store, cpu_limit_s=parse_cpu_limit_s,
                                         host_limit=parse_failed_per_host)  # fmt: skip
        self.store_spec = store
        self.runner = runner
        self.publish = publish
        self.max_segments = max_segments
        self.poll_s = poll_s
        self.lru_size, self.batch_size = lru_size, batch_size
        self.sleep = sleep
        self.rounds = 0
        self.segments_done = 0
        self.new_pending = 0
        self.failures = 0
        self._pipeline: LinkPipeline | None = None
        self._unsent: LinksReport | None = None  # a report the broker has not confirmed yet
        self._unsent_round: Round | None = None  # its round, closed in the book once its segments are done
        self._book = RoundBook(segments)
        self._active: set[str] = set()  # ids of the rounds this process is running (extracting or merging)
        self._next: tuple[Round, Future[JobOutput], float] | None = None  # the round being extracted
        self._merge: tuple[Round, JobOutput, float] | None = None  # the round to merge (next, or again)
        self._pool: ProcessPoolExecutor | None = None

    def rules(self) -> CrawlLinkRules | None:
        """The crawl's link rules, or None before its dispatcher has started (never creates the store)."""
        if self.store_spec.startswith("sqlite:") and not Path(self.store_spec.removeprefix("sqlite:")).exists():
            return None
        store = open_store(self.store_spec)
        try:
            text = store.get_meta(RULES_KEY)
        finally:
            store.close()
        return CrawlLinkRules.from_json(text) if text else None

    def run(self, stop: Callable[[], bool]) -> dict[str, Any]:
        """Rounds until ``stop()``. A failed round (the store or the broker away, a job that died) is
        logged and tried again after a back-off: its segments are still in place, and running them
        again adds nothing twice."""
        backoff = self.poll_s
        try:
            while not stop():
                try:
                    self._step()
                    backoff = self.poll_s
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
                "failures": self.failures, "quarantined": self.quarantine.quarantined}  # fmt: skip

    def _step(self) -> None:
        if self._pipeline is None:
            rules = self.rules()
            if rules is None:  # the dispatcher has not started this crawl yet
                self.sleep(self.poll_s)
                return
            args = self.quarantine.job_args(
                rules.job_args(store=self.store_spec, batch_size=self.batch_size, lru_size=self.lru_size))
            self._pipeline = LinkPipeline(self.runner, args)
        done = self.pipelined_round() if isinstance(self._pipeline, LinkPipeline) else self.round()
        if not done:
            self.sleep(self.poll_s)

    def round(self) -> bool:
        """One micro-batch, extract then merge; False when there was nothing to do."""
        assert self._pipeline is not None
        self._flush_unsent()
        rnd = self._take_round()
        if rnd is None:
            return False
        todo = [self.segments / key for key in rnd.segments]
        started = time.monotonic()
        try:
            if isinstance(self._pipeline, LinkPipeline):
                result = self._pipeline.process_many(todo, name=f"round-{self.rounds}", round_id=rnd.id)
            else:  # a stand-in with the older signature (tests)
                result = self._pipeline.process_many(todo, name=f"round-{self.rounds}")
        except BaseException:
            self._active.discard(rnd.id)  # still in the book: taken again, same id, by the next step
            raise
        self._report(rnd, result, started)
        return True

    def pipelined_round(self) -> bool:
        """Merge the round whose extract job has finished, while the next round's extract runs in the worker
        process (see the module docstring); False when there was nothing to do."""
        assert isinstance(self._pipeline, LinkPipeline)
        self._flush_unsent()
        if self._merge is None:  # else a merge that failed: again first, before any later round's
            if self._next is None:
                self._next = self._start_extract()
                if self._next is None:
                    return False
            rnd, future, started = self._next
            self._next = None
            try:
                self._merge = (rnd, future.result(), started)
            except BaseException:
                self._active.discard(rnd.id)  # still in the book: taken again, same id, by the next step
                if isinstance(future.exception(), BrokenProcessPool):
                    self._close_pool()
                raise
            self._next = self._start_extract()  # overlaps the merge below
        rnd, extracted, started = self._merge  # (a URL's tag holds one round: merges go in round order)
        paths = [p for p in (self.segments / key for key in rnd.segments) if p.exists()]
        result = self._pipeline.update(paths, extracted, name=f"round-{self.rounds}", round_id=rnd.id)
        self._merge = None
        self._report(rnd, result, started)
        return True

    def _start_extract(self) -> tuple[Round, Future[JobOutput], float] | None:
        assert isinstance(self._pipeline, LinkPipeline)
        rnd = self._take_round()
        if rnd is None:
            return None
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        paths = [self.segments / key for key in rnd.segments]
        future = self._pool.submit(extract_links, paths, self._pipeline.args.extract(), self._pipeline.cfg)
        return rnd, future, time.monotonic()

    def _take_round(self) -> Round | None:
        """A round written down and not running here (a killed service's, run again as it was), else a new one
        over the closed segments no round claims; None when there is nothing to do."""
        claimed: set[str] = set()
        for rnd in self._book.unfinished():
            if rnd.id in self._active:
                claimed.update(rnd.segments)
                continue
            left = tuple(key for key in rnd.segments if (self.segments / key).exists())
            if not left:  # merged, reported and moved aside before the kill: nothing left to do
                self._book.close(rnd)
                continue
            self._active.add(rnd.id)
            return Round(rnd.id, left)
        todo = [seg for seg in closed_segments(self.segments, now=time.time()) if segment_key(seg) not in claimed]
        if not todo:
            return None
        rnd = self._book.open(todo[: self.max_segments])
        self._active.add(rnd.id)
        return rnd

    def _report(self, rnd: Round, result: RoundResult, started: float) -> None:
        hosts = Counter(rec["host"] for rec in result.new_pending)
        report = LinksReport(rnd.segments, dict(hosts))
        self._unsent = report
        self._unsent_round = rnd
        self.publish(report)
        self._finish(report)
        self.rounds += 1
        self.new_pending += len(result.new_pending)
        log.info("links round %d: %d segments, %d candidates, %d new pending on %d hosts in %.2fs",
                 self.rounds, len(rnd.segments), result.candidates, len(result.new_pending), len(hosts),
                 time.monotonic() - started)  # fmt: skip

    def _flush_unsent(self) -> None:
        if self._unsent is not None:
            self.publish(self._unsent)  # the last round's report first (its segments wait for it)
            self._finish(self._unsent)

    def _finish(self, report: LinksReport) -> None:
        self._unsent = None
        for key in report.segments:
            path = self.segments / key
            if path.exists():
                mark_done(self.segments, path)
                self.segments_done += 1
        rnd, self._unsent_round = self._unsent_round, None
        if rnd is not None:
            self._book.close(rnd)
            self._active.discard(rnd.id)

    def _close_pool(self, *, wait: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=True)

    def close(self) -> None:
        """Stop and reap the extract worker (a round it was running stays in the book for the next start)."""
        self._next = None
        self._close_pool(wait=True)


def amqp_publisher(settings: Settings, service: str) -> Callable[[LinksReport], None]:
    """``publish(report)`` over a confirmed channel to the service's results queue (reconnecting)."""
    from kombu import Producer

    from pipeline.transport import topology
    from pipeline.transport.amqp import fleet_connection
    from pipeline.transport.messages import encode
    from pipeline.transport.msgauth import links_headers

    state: dict[str, Any] = {}

    def publish(report: LinksReport) -> None:
        enc = encode(report.to_json())
        for attempt in range(30):
            try:
                if "producer" not in state:
                    conn = fleet_connection(settings.fleet, confirm=True)  # TLS, password file (tls.py)
                    state["conn"], state["producer"] = conn, Producer(conn.channel())
                state["producer"].publish(
                    enc.body, exchange=topology.results_exchange(settings.fleet), routing_key=service,
                    content_type=enc.content_type, content_encoding=enc.content_encoding, delivery_mode=2,
                    declare=[topology.results_queue(settings.fleet, service)], retry=False,
                    headers=links_headers(settings.fleet, enc.body),  # signed: the dispatcher drops forgeries
                )  # fmt: skip
                return
            except Exception as exc:  # broker away: reconnect and try again, bounded
                log.warning("links: publish failed (%s: %s); retrying", type(exc).__name__, exc)
                conn = state.pop("conn", None)
                state.pop("producer", None)
                if conn is not None:
                    with contextlib.suppress(Exception):  # closing a broken connection
                        conn.release()
                time.sleep(min(5.0, 0.5 * (attempt + 1)))
        raise RuntimeError("links: the broker did not take the report in 30 attempts")

    return publish
