"""Reliability bugs the fault suite found, each with its mechanism and fix (the constants below, also
in RELIABILITY.md). All of them are fixed: each test here is now a plain regression test that fails
if the bug comes back. None writes an ``xfail`` record any more (``results.pin`` is for a bug still
open, pinned by an xfail marker, as tests/faults/test_faults_storage.py has one).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from fetchers.records import FetchResult
from pipeline.crawl.core import CrawlCore
from pipeline.dispatch.protocols import Heartbeat
from pipeline.harness.faults.accounting import Strike, account
from pipeline.harness.faults.bed import Bed
from pipeline.harness.faults.embedded import crawler, finish
from pipeline.harness.faults.fleet import FleetRig
from pipeline.harness.faults.services import PrivateUnbound, broker_vhost
from pipeline.harness.faults.snapshot import stored_urls
from pipeline.settings import Settings
from pipeline.storage.sqlite import SqliteStore
from tests.services import need_unbound

pytestmark = pytest.mark.faults

EXPIRY_REQUEUES_ANSWERED = (
    "Dispatcher._expire re-queues every task of an expired batch (frontier.requeue(batch.tasks)), also the "
    "URLs whose results CrawlCore has already journaled and stored, so a worker killed mid-batch (or a "
    "broker restart) makes the fleet fetch answered URLs again. Fix (pipeline/crawl/core.py + "
    "pipeline/dispatch/dispatcher.py): CrawlCore records the url_ids answered per in-flight serial and, "
    "when the dispatcher expires a serial, only the unanswered tasks go back (e.g. Dispatcher.tick/register "
    "return the expired batches and let CrawlCore requeue them, or accept an `answered` filter)."
)
PAUSED_DISPATCHER_KILLS_NODES = (
    "A fleet dispatcher stopped (SIGSTOP, a long GC or VM pause) for more than missed_heartbeats x heartbeat_s "
    "declares every node dead on resume: its first pump times out before reading the heartbeats already "
    "buffered on its socket, the next tick sees every node silent, expires every batch and re-issues them "
    "while the workers go on: every unanswered URL of those batches is fetched twice. Fix "
    "(pipeline/transport/dispatcher/service.py): count a loop stall longer than a heartbeat period as paused "
    "time (like BrokerSession.paused_s), or judge liveness only after a full heartbeat period of listening."
)
SERIALS_COLLIDE_ACROSS_CRAWLS = (
    "FetchRuntime remembers finished batches by serial alone (runtime._done / _running), but every fresh crawl "
    "store starts its serials at 1; a worker shared by two crawls (two services, or a crawl after another) "
    "answers the second crawl's batch N from its memory of the first crawl's batch N, publishes nothing, and "
    "the batch waits for the lease (120 s by default) to expire. Fix (pipeline/transport/node/runtime.py): key the "
    "memory by (service, crawl id, serial), e.g. a crawl id the dispatcher stores in meta and sends with the batch."
)
DNS_OUTAGE_IS_FINAL = (
    "A resolver outage makes URLs FAILED for good: fetchers.engine maps DnsError(timeout/servfail) to "
    "dns_timeout/dns_servfail, which is not in fetchers.report.RETRY_LATER, CrawlCore stores it as a final "
    "FAILED outcome, and the negative cache (dns.negative_ttl_s = 300 s) repeats the failure for every URL of "
    "the host. Fix: treat dns_timeout/dns_servfail like robots_unavailable (report the task unfinished, "
    "re-queue it with a back-off) and keep transient DNS errors out of the negative cache, or cache them "
    "for seconds, not minutes."
)


def stop_after_events(
    rig: FleetRig, proc: Any, *, event: str, serials: tuple[int, ...], stop_s: float
) -> None:
    """For each serial: once an ``event`` of that serial (or a later one) is logged, SIGSTOP ``proc`` for
    ``stop_s`` seconds, then SIGCONT it."""
    for after in serials:

        def seen(ev: dict[str, Any], n: int = after) -> bool:
            return bool(ev["ev"] == event and ev["serial"] >= n)

        rig.wait_event(seen)
        proc.pause()
        time.sleep(stop_s)
        proc.resume()


def test_expired_batch_requeues_only_unanswered_urls(tmp_path: Path) -> None:
    """Was a known bug (EXPIRY_REQUEUES_ANSWERED); fixed in pipeline/crawl/core.py + pipeline/frontier/answered.py (AnsweredFilter). Regression test."""
    now = [1000.0]
    store = SqliteStore(tmp_path / "crawl.db")
    seeds = [f"http://a.crawl.test/p{i}" for i in range(6)]
    core = CrawlCore(Settings(), store, seeds=seeds, out_dir=tmp_path, clock=lambda: now[0])
    core.register_fetcher("f1")
    batch = core.next_batch("f1")
    assert batch is not None and len(batch.tasks) == 6
    answered = {t.url for t in batch.tasks[:3]}
    for t in batch.tasks[:3]:
        core.on_result(FetchResult(t.url, t.url_id, t.depth, final_url=t.url, status=200, content_type="text/html",
                                   body=b"<html></html>", serial=batch.serial, fetcher_id="f1", fetched_at=now[0]))  # fmt: skip
    core.flush()
    core.register_fetcher("f1")  # the node restarted: what it held expires (as the fleet dispatcher does)
    core.on_batch_done(batch.serial, fetcher_id="f1", pages=0, elapsed_s=0.0)
    offered: list[str] = []
    for _ in range(4):
        now[0] += 30
        core.on_heartbeat(Heartbeat("f1", sent_at=now[0], successes=3, failures=0, rate=1.0, free_slots=8))
        again = core.next_batch("f1")
        if again is not None:
            offered += [t.url for t in again.tasks]
    store.close()
    assert sorted(offered) == sorted(set(seeds) - answered)


@pytest.mark.integration
def test_dispatcher_paused_past_heartbeats_expires_nothing(fault_bed: Bed, tmp_path: Path) -> None:
    """Was PAUSED_DISPATCHER_KILLS_NODES; fixed in pipeline/transport/wire/session.py: time the dispatcher was
    not listening (a gap between pumps, noted again before each tick) is paused time. Regression test."""
    with broker_vhost() as url:
        rig = FleetRig(fault_bed, url, tmp_path)
        try:
            rig.start_worker(1)
            rig.start_worker(2)
            rig.start_dispatcher()
            rig.nodes_up(2)
            # Three pauses, each right after a batch report arrived, so that the dispatcher is busy with
            # results (past its pump, before its tick) and other batches are out: the stop lands in the
            # part of the loop where the bug was.
            stop_after_events(rig, rig.dispatcher, event="done", serials=(2, 5, 8), stop_s=2.5)  # 5 periods
            summary = rig.wait_dispatcher()
        finally:
            rig.close()
    dead = [ev for ev in rig.events() if ev["ev"] == "node_dead"]
    assert summary["fleet"]["expired_batches"] == 0 and not dead, (summary["fleet"], dead)


@pytest.mark.integration
def test_worker_shared_by_two_crawls_fetches_both(fault_bed: Bed, tmp_path: Path) -> None:
    """Was SERIALS_COLLIDE_ACROSS_CRAWLS; fixed in pipeline/transport/node/runtime.py (memory keyed by
    service, serial and issue time). Regression test."""
    with broker_vhost() as url:
        rig = FleetRig(fault_bed, url, tmp_path, lease_s=8.0)
        try:
            rig.start_worker(1)
            rig.start_dispatcher()
            first = rig.wait_dispatcher()
            rig.new_crawl("second")
            rig.start_dispatcher()
            # Serial 1 of the second crawl: done (fetched) or expired (answered from the worker's memory).
            ev = rig.wait_event(lambda e: e["ev"] in ("done", "expired") and e["serial"] == 1, timeout_s=90)
        finally:
            rig.close()
    assert first["fleet"]["expired_batches"] == 0
    assert ev["ev"] == "done", ev


def test_dns_outage_at_start_loses_nothing(fault_bed: Bed, tmp_path: Path) -> None:
    """Was DNS_OUTAGE_IS_FINAL; fixed: transient DNS errors are retry-later with a host back-off
    (fetchers/report.py, fetchers/engine.py), kept out of the Bloom negative cache
    (pipeline/dns/cache_resolver.py), and capped per URL in pipeline/crawl/inflight.py. Regression test."""
    need_unbound()
    dns = PrivateUnbound(fault_bed.tb.dns_port, tmp_path / "unbound").start()
    start = time.time()
    try:
        fault_t = dns.proc.pause()  # the resolver hangs before the crawl's first look-up
        proc = crawler(fault_bed, tmp_path, dns=dns.address).start()
        time.sleep(8.0)  # c-ares gives up after timeout_s x tries = 6 s
        back_t = dns.proc.resume()
        _summary, end_t = finish(fault_bed, proc)
    finally:
        dns.stop()
    fault_bed.settle()
    acc = account(truth=fault_bed.truth, log=fault_bed.window(start), stored_urls=stored_urls(tmp_path / "out"),
                  strike=Strike("unbound", "SIGSTOP", fault_t, back_t, end_t=end_t))  # fmt: skip
    assert acc.lost == 0, (acc.lost, acc.lost_sample)
    assert acc.repeats == 0 and acc.robots_extra == 0, (acc.repeated_sample, acc.robots_sample)


JOBS_INLINE_PRINT_RACE = (
    "`crawlfleet jobs run --runner inline` over two or more segments aborts now and then (Fatal Python error, "
    "TypeError: a bytes-like object is required, exit 134) without any fault: run_pipelined runs a segment's "
    "inline mrjob on a background thread, mrjob's inline runner swaps the process-wide sys.stdout/sys.stderr "
    "while its task runs, and the main thread prints the previous round's summary line into the swapped "
    "stream. Fix (jobs/cli.py or jobs/runner.py): write summaries to a stream captured at start "
    "(os.fdopen(os.dup(1))) or run inline jobs on the calling thread (no pipelining for the inline runner)."
)


def test_jobs_inline_driver_never_aborts(fault_bed: Bed, tmp_path: Path) -> None:
    """Was JOBS_INLINE_PRINT_RACE (fixed in 0774511: summaries go to duplicated descriptors). Regression test."""
    import subprocess

    from pipeline.harness.faults.jobs_trial import jobs_cmd, make_segments, seed_db

    segs = make_segments(fault_bed, tmp_path / "mk", pieces=6)
    codes = []
    for i in range(5):
        db = tmp_path / f"run{i}.db"
        seed_db(db, fault_bed)
        proc = subprocess.run(jobs_cmd(segs, db, tmp_path / f"w{i}", fault_bed, runner="inline"), capture_output=True,
                              timeout=300, check=False)  # fmt: skip
        codes.append(proc.returncode)
    assert codes == [0] * 5, codes


STALLED_BROKER_EXPIRES_ALL = (
    "A RabbitMQ node that stalls (SIGSTOP, a long GC, a disk alarm) for more than missed_heartbeats x heartbeat_s "
    "makes the fleet dispatcher declare every node dead: its connection stays open but silent, so "
    "BrokerSession.paused_s (which counts only disconnections) does not pause the liveness clock, every node "
    "misses its heartbeats at once, every batch out expires and is re-issued while the workers finish the "
    "originals: their unanswered URLs are fetched twice (the soak's rabbitmq/stop duplicates). Fix "
    "(pipeline/transport/dispatcher/service.py, session.py): when no heartbeat at all arrives for a period, treat "
    "it as a transport stall and pause the liveness clock, as for a disconnection."
)


@pytest.mark.integration
def test_stalled_broker_expires_no_batch(fault_bed: Bed, tmp_path: Path) -> None:
    """Was STALLED_BROKER_EXPIRES_ALL; fixed in pipeline/transport/wire/session.py: after a silence the dispatcher
    makes a blocking round trip to the broker and counts a slow answer as paused time. Regression test."""
    from pipeline.harness.faults.services import PrivateRabbit

    rabbit = PrivateRabbit(tmp_path / "rabbit").start()
    try:
        rig = FleetRig(fault_bed, rabbit.url, tmp_path / "fleet")
        try:
            rig.start_worker(1)
            rig.start_worker(2)
            rig.start_dispatcher()
            rig.nodes_up(2)
            # Right after a batch went out, so that batches are held; six heartbeat periods each.
            stop_after_events(rig, rabbit.proc, event="issue", serials=(2, 6), stop_s=3.0)
            summary = rig.wait_dispatcher()
        finally:
            rig.close()
    finally:
        rabbit.stop()
    assert summary["fleet"]["expired_batches"] == 0, summary["fleet"]
