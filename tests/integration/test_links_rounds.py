"""``crawlfleet links`` rounds on the real link jobs (inline runner; a SQLite crawl db, and the real HBase):
pipelined rounds give the crawl db one pass over the same segments gives; a round killed inside its merge is
taken over and counts every in-link once; and two services in two processes share a crawl, one killed with
SIGKILL in the middle of its merge, the other finishing that round: each segment reported once, in-link
counts equal to one pass."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from jobs.jobrun import JobOutput
from jobs.runner import LinkPipeline
from jobs.runnerconfig import RunnerConfig
from jobs.synth import make_results, write_segment
from pipeline.storage.base import UrlRecord
from pipeline.storage.factory import from_spec
from pipeline.storage.leases import Leases
from pipeline.storage.segments import Segments
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.links.rounds import RoundBook
from pipeline.transport.links.rules import RULES_KEY, CrawlLinkRules
from pipeline.transport.links.service import LinkJobsService
from pipeline.transport.wire.replies import LinksReport
from pipeline.urls import host_of

pytestmark = pytest.mark.integration

RULES = CrawlLinkRules(("crawl.test",), 5, 10_000)


def segments(root: Path, n: int) -> list[Path]:
    """``n`` closed node segments of 30 pages each over the same 3 hosts (links repeat across segments)."""
    results = list(make_results(30 * n, hosts=3, links=16, page_bytes=3000, seed=5))
    out = []
    for i in range(n):
        path = root / f"node{i % 2}" / f"svc-{i:09d}-1.jsonl"
        write_segment(path, results[i * 30 : (i + 1) * 30])
        out.append(path)
    return out


def store_with_rules(db: Path | str) -> str:
    spec = db if isinstance(db, str) else f"sqlite:{db}"
    store = from_spec(spec)
    try:
        store.put_meta(RULES_KEY, RULES.to_json())
    finally:
        store.close()
    return spec


def inlinks(db: Path | str) -> dict[str, int]:
    store = from_spec(db if isinstance(db, str) else f"sqlite:{db}")
    try:
        return {
            rec.url: rec.inlinks for host, _ in store.pending_hosts() for rec in store.pending(host, 100_000)
        }
    finally:
        store.close()


def reference(segs: list[Path], tmp_path: Path) -> dict[str, int]:
    """One round over every segment: what the crawl db must hold after the service."""
    db = tmp_path / "ref.db"
    spec = store_with_rules(db)
    LinkPipeline(RunnerConfig(work_dir=tmp_path / "ref-work"), RULES.job_args(store=spec, batch_size=50,
                 lru_size=1000)).process_many(segs, name="ref")  # fmt: skip
    return inlinks(db)


def crawl_dirs(tmp_path: Path, n: int) -> tuple[Path, list[Path], dict[str, int], Path, str]:
    """``n`` closed segments under ``tmp_path/segs``, the reference crawl db's in-links, and the service's
    own store (path and spec)."""
    root = tmp_path / "segs"
    segs = segments(root, n)
    want = reference(segs, tmp_path)
    db = tmp_path / "svc.db"
    return root, segs, want, db, store_with_rules(db)


def serve(
    root: Path, spec: str, work: Path, *, max_segments: int, clock: Callable[[], float] = time.time
) -> tuple[LinkJobsService, list[LinksReport]]:
    published: list[LinksReport] = []
    svc = LinkJobsService(segments=str(root), store=spec, runner=RunnerConfig(work_dir=work), publish=published.append,
                          max_segments=max_segments, batch_size=50, lru_size=1000, poll_s=0.05, clock=clock)  # fmt: skip
    svc.run(stop=lambda: not Segments(str(root)).closed() and svc._next is None and svc.rounds > 0)
    return svc, published


def test_pipelined_rounds_give_the_crawl_db_of_one_pass(tmp_path: Path) -> None:
    root, segs, want, db, spec = crawl_dirs(tmp_path, 6)
    svc, published = serve(root, spec, tmp_path / "work", max_segments=2)
    assert (
        svc.rounds >= 3 and svc.failures == 0
    )  # micro-batches of two segments, extract and merge overlapped
    reported = [key for report in published for key in report.segments]
    assert sorted(reported) == sorted(f"{s.parent.name}/{s.name}" for s in segs)  # each segment once
    assert inlinks(db) == want
    with SqliteStore(db) as store:
        assert [k for k, _ in store.scan_meta("links:")] == ["links:last-mid"]  # no round left behind


def test_a_round_killed_in_its_merge_counts_each_inlink_once(tmp_path: Path) -> None:
    root, segs, want, db, spec = crawl_dirs(tmp_path, 4)
    # The killed service's round: claimed, given its merge id, extracted, and half of its merge in the store.
    with SqliteStore(db) as store:
        dead = RoundBook(store, Leases(store, owner="dead", ttl_s=10))
        taken = dead.open([f"{p.parent.name}/{p.name}" for p in segs[:3]])
        assert taken is not None
        rnd = dead.begin_merge(*taken)
    assert rnd is not None and rnd.mid
    pipe = LinkPipeline(RunnerConfig(work_dir=tmp_path / "killed"), RULES.job_args(store=spec, batch_size=50,
                        lru_size=1000))  # fmt: skip
    extracted = pipe.extract(segs[:3])
    half = JobOutput(extracted.records[: len(extracted.records) // 2], {}, 0.0)
    pipe.update(segs[:3], half, name="killed", round_id=rnd.mid)
    assert any(inlinks(db).get(rec["url"], 0) > 0 for rec in half.records)
    # A service started after the dead one's lease ran out (its clock a minute on) takes that round over
    # first, with its segments and merge id, then runs the rest.
    svc, published = serve(root, spec, tmp_path / "work", max_segments=8, clock=lambda: time.time() + 60)
    assert published[0].segments == rnd.segments and svc.taken_over == 1
    got = inlinks(db)
    over = {u: (got[u], n) for u, n in want.items() if got.get(u, 0) > n}
    assert not over, f"{len(over)} URLs counted twice, e.g. {list(over.items())[:3]}"
    assert got == want


class MergeDiesOnce(LinkPipeline):
    """The first merge writes half of its records, then fails (the store went away mid-merge)."""

    failed = False

    def update(self, segments, extracted, *, name, round_id):  # type: ignore[no-untyped-def]
        if self.failed:
            return super().update(segments, extracted, name=name, round_id=round_id)
        self.failed = True
        super().update(segments, JobOutput(extracted.records[: len(extracted.records) // 2], {}, 0.0), name=name,
                       round_id=round_id)  # fmt: skip
        raise OSError("store away mid-merge")


def test_a_failed_merge_runs_again_before_any_later_round_merges(tmp_path: Path) -> None:
    root, _segs, want, db, spec = crawl_dirs(tmp_path, 6)
    published: list[LinksReport] = []
    svc = LinkJobsService(segments=str(root), store=spec, runner=RunnerConfig(work_dir=tmp_path / "work"),
                          publish=published.append, max_segments=2, batch_size=50, lru_size=1000, poll_s=0.05)  # fmt: skip
    svc._pipeline = MergeDiesOnce(svc.runner, RULES.job_args(store=spec, batch_size=50, lru_size=1000))
    svc.sleep = lambda _s: None
    svc.run(stop=lambda: not Segments(str(root)).closed() and svc._next is None and svc.rounds > 0)
    assert svc.failures == 1 and svc.rounds >= 3
    assert inlinks(db) == want  # the later rounds' URLs were not counted a second time by the failed round


# --- two services in two processes on the real HBase, one killed in its merge -------------------------------
class MergeStallsHalfway(LinkPipeline):
    """Merges half of its first round, says so in a file, then waits to be killed."""

    def update(self, segments, extracted, *, name, round_id):  # type: ignore[no-untyped-def]
        half = JobOutput(extracted.records[: len(extracted.records) // 2], {}, 0.0)
        super().update(segments, half, name=name, round_id=round_id)
        Path(os.environ["STALL_FLAG"]).write_text(round_id)
        time.sleep(600)
        raise AssertionError("not killed")


def run_service(root: str, spec: str, work: str, out: str, stall: bool) -> None:
    """A link-jobs service process: reports go to a file (one JSON line each)."""
    import json

    def publish(report: LinksReport) -> None:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(list(report.segments)) + "\n")

    svc = LinkJobsService(segments=root, store=spec, runner=RunnerConfig(work_dir=Path(work)), publish=publish,
                          max_segments=3, batch_size=50, lru_size=1000, poll_s=0.1, lease_ttl_s=6)  # fmt: skip
    if stall:
        svc._pipeline = MergeStallsHalfway(svc.runner, RULES.job_args(store=spec, batch_size=50, lru_size=1000))
    svc.run(stop=lambda: False)


def test_two_services_one_killed_in_its_merge_give_each_segment_once_on_hbase(
    tmp_path: Path, hbase_thrift: tuple[str, int], hbase_prefix: str
) -> None:
    host, port = hbase_thrift
    root = tmp_path / "segs"
    segs = segments(root, 6)
    want = reference(segs, tmp_path)
    spec = store_with_rules(f"hbase://{host}:{port}/{hbase_prefix}lk2")
    flag, reports = tmp_path / "stalled", tmp_path / "reports.jsonl"
    ctx = multiprocessing.get_context("spawn")
    os.environ["STALL_FLAG"] = str(flag)
    a = ctx.Process(target=run_service, args=(str(root), spec, str(tmp_path / "wa"), str(reports), True))
    a.start()
    deadline = time.monotonic() + 240
    while not flag.exists() and time.monotonic() < deadline and a.is_alive():
        time.sleep(0.1)
    assert flag.exists(), "the first service never began a merge"
    os.kill(a.pid, signal.SIGKILL)  # type: ignore[arg-type]
    a.join()
    b = ctx.Process(target=run_service, args=(str(root), spec, str(tmp_path / "wb"), str(reports), False))
    b.start()
    try:
        while time.monotonic() < deadline and (Segments(str(root)).closed() or not _rounds_gone(spec)):
            time.sleep(0.2)
    finally:
        b.kill()
        b.join()
    import json

    reported = [k for line in reports.read_text().splitlines() for k in json.loads(line)]
    assert sorted(reported) == sorted(f"{s.parent.name}/{s.name}" for s in segs)  # each once, all of them
    assert inlinks(spec) == want


def _rounds_gone(spec: str) -> bool:
    store = from_spec(spec)
    try:
        return not [k for k, _ in store.scan_meta("links:round:")]
    finally:
        store.close()


@pytest.mark.parametrize("recrawl", [False, True])
def test_a_round_as_one_job_gives_the_crawl_db_of_the_two_jobs(tmp_path: Path, recrawl: bool) -> None:
    """``mr_link_round`` (what the cluster runners run: extract chained to the merge on the runner) on the
    inline runner against the two jobs it chains: the same new URLs, in-link counts and re-crawl state."""
    import json

    from pipeline.frontier.schedule import RECRAWL_META

    segs = segments(tmp_path / "segs", 3)
    fetched = list(make_results(90, hosts=3, links=16, page_bytes=3000, seed=5))
    new: dict[str, list[str]] = {}  # each way's new URLs
    links: dict[str, dict[str, int]] = {}  # its in-link counts
    due: dict[str, list[int]] = {}  # when the fetched URLs are due again, when re-crawling
    for name in ("two", "one"):
        db = tmp_path / f"{name}.db"
        spec = store_with_rules(db)
        if recrawl:  # the fetched URLs are in the crawl db, as the dispatcher leased them from it
            with SqliteStore(db) as store:
                store.put_meta(RECRAWL_META, json.dumps({"enabled": True}))
                store.add_urls([UrlRecord(r.url, r.url_id, host_of(r.url), r.depth) for r in fetched])
        pipe = LinkPipeline(RunnerConfig(work_dir=tmp_path / f"w-{name}"),
                            RULES.job_args(store=spec, batch_size=50, lru_size=1000))  # fmt: skip
        if name == "two":
            got = pipe.process_many(segs, name="r", round_id="rtwo")
        else:
            got = pipe.run_round(segs, name="r", round_id="rone")
        new[name], links[name] = sorted(r["url"] for r in got.new_pending), inlinks(db)
        if recrawl:
            with SqliteStore(db) as store:
                revisits = [store.get_revisit(r.url) for r in fetched]
            assert sum(r is not None for r in revisits) > 0
            due[name] = sorted(round(r.next_fetch) for r in revisits if r is not None)
    assert new["one"] and (new["one"], links["one"]) == (new["two"], links["two"])
    if recrawl:
        assert len(due["one"]) == len(due["two"]) > 0
