"""``crawlfleet links`` rounds on the real link jobs (inline runner, a SQLite crawl db): pipelined rounds give
the crawl db one pass over the same segments gives, and a round killed inside its merge, run again from its
manifest, counts every in-link once (#18 points 6 and 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.runner import JobOutput, LinkPipeline, RunnerConfig
from jobs.synth import make_results, write_segment
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.linkjobs import LinkJobsService, RoundBook, closed_segments
from pipeline.transport.linkrules import RULES_KEY, CrawlLinkRules
from pipeline.transport.replies import LinksReport

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


def store_with_rules(db: Path) -> str:
    with SqliteStore(db) as store:
        store.put_meta(RULES_KEY, RULES.to_json())
    return f"sqlite:{db}"


def inlinks(db: Path) -> dict[str, int]:
    with SqliteStore(db) as store:
        return {
            rec.url: rec.inlinks for host, _ in store.pending_hosts() for rec in store.pending(host, 100_000)
        }


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
    root: Path, spec: str, work: Path, *, max_segments: int
) -> tuple[LinkJobsService, list[LinksReport]]:
    published: list[LinksReport] = []
    svc = LinkJobsService(segments=root, store=spec, runner=RunnerConfig(work_dir=work), publish=published.append,
                          max_segments=max_segments, batch_size=50, lru_size=1000, poll_s=0.05)  # fmt: skip
    svc.run(stop=lambda: not closed_segments(root) and svc._next is None and svc.rounds > 0)
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
    assert RoundBook(root).unfinished() == []


def test_a_round_killed_in_its_merge_counts_each_inlink_once(tmp_path: Path) -> None:
    root, segs, want, db, spec = crawl_dirs(tmp_path, 4)
    # The killed service's round: written down, extracted, and half of its merge in the store.
    rnd = RoundBook(root).open(segs[:3])
    pipe = LinkPipeline(RunnerConfig(work_dir=tmp_path / "killed"), RULES.job_args(store=spec, batch_size=50,
                        lru_size=1000))  # fmt: skip
    extracted = pipe.extract(segs[:3])
    half = JobOutput(extracted.records[: len(extracted.records) // 2], {}, 0.0)
    pipe.update(segs[:3], half, name="killed", round_id=rnd.id)
    assert any(inlinks(db).get(rec["url"], 0) > 0 for rec in half.records)
    # The restarted service runs that round again first, with its id and its segments, then the rest.
    svc, published = serve(root, spec, tmp_path / "work", max_segments=8)
    assert published[0].segments == rnd.segments
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
    svc = LinkJobsService(segments=root, store=spec, runner=RunnerConfig(work_dir=tmp_path / "work"),
                          publish=published.append, max_segments=2, batch_size=50, lru_size=1000, poll_s=0.05)  # fmt: skip
    svc._pipeline = MergeDiesOnce(svc.runner, RULES.job_args(store=spec, batch_size=50, lru_size=1000))
    svc.sleep = lambda _s: None
    svc.run(stop=lambda: not closed_segments(root) and svc._next is None and svc.rounds > 0)
    assert svc.failures == 1 and svc.rounds >= 3
    assert inlinks(db) == want  # the later rounds' URLs were not counted a second time by the failed round
