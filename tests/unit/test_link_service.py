"""The link-jobs service's rounds (``pipeline.transport.links.service``) with a real SQLite store and local
segments; the mrjob jobs are the seam (a fake extract and update). Reports then retires; a refused report
leaves everything for the next try; a failure backs off; two services split the segments and each is
reported once; a killed service's round is taken over by another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobs.jobrun import JobOutput
from jobs.runner import JobArgs, RoundResult
from jobs.runnerconfig import RunnerConfig
from pipeline.storage.segments import DONE_DIR, Segments
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.links.rules import RULES_KEY, CrawlLinkRules
from pipeline.transport.links.service import LinkJobsService
from pipeline.transport.wire.replies import LinksReport
from tests.unit.test_core import Clock


class FakePipeline:
    def __init__(self, new: list[dict[str, Any]], work: Path) -> None:
        self.new = new
        self.args = JobArgs(store="")
        self.cfg = RunnerConfig(work_dir=work)
        self.updates: list[tuple[list[str], str]] = []

    def update(self, segments: list[str], extracted: JobOutput, *, name: str, round_id: str) -> RoundResult:
        self.updates.append(([s.rsplit("/", 2)[-2] + "/" + s.rsplit("/", 1)[-1] for s in segments], round_id))
        return RoundResult(name, len(extracted.records), self.new, 0.0, 0.0, {})


def fake_extract(segments: list[str], _args: list[str], _cfg: RunnerConfig) -> JobOutput:
    return JobOutput([{"url": s} for s in segments], {}, 0.0)


def store_spec(tmp_path: Path) -> str:
    with SqliteStore(tmp_path / "crawl.db") as store:
        store.put_meta(RULES_KEY, CrawlLinkRules(("test",), 5, 100).to_json())
    return f"sqlite:{tmp_path / 'crawl.db'}"


def service(tmp_path: Path, published: list[LinksReport], *, fail: bool = False, owner: str = "a",
            clock: Clock | None = None, retention_s: float = 0.0, max_segments: int = 256,
            new: list[dict[str, Any]] | None = None) -> LinkJobsService:  # fmt: skip
    def publish(report: LinksReport) -> None:
        if fail:
            raise ConnectionError("broker away")
        published.append(report)

    svc = LinkJobsService(segments=str(tmp_path / "segs"), store=store_spec(tmp_path) if not (tmp_path / "crawl.db").exists()
                          else f"sqlite:{tmp_path / 'crawl.db'}", publish=publish, runner=RunnerConfig(work_dir=tmp_path / f"w-{owner}"),
                          owner=owner, clock=clock or Clock(), extract=fake_extract, retention_s=retention_s,
                          max_segments=max_segments, lease_ttl_s=10)  # fmt: skip
    svc._pipeline = FakePipeline(new if new is not None else [{"host": "a.test"}, {"host": "a.test"}, {"host": "b.test"}],
                                 tmp_path)  # type: ignore[assignment]
    svc.sleep = lambda _s: None
    return svc


def fake_pipeline(svc: LinkJobsService) -> FakePipeline:
    """The fake merge ``service`` gave ``svc``."""
    assert isinstance(svc._pipeline, FakePipeline)
    return svc._pipeline


def segment(tmp_path: Path, node: str, name: str) -> None:
    segs = Segments(str(tmp_path / "segs"))
    segs.close_part(segs.write_part(node, name, b"{}\n"))


@pytest.mark.parametrize("retention_s", [0.0, -1.0])
def test_a_round_reports_then_retires_its_segments(tmp_path: Path, retention_s: float) -> None:
    published: list[LinksReport] = []
    svc = service(tmp_path, published, retention_s=retention_s)
    segment(tmp_path, "n1", "s-1.jsonl")
    segment(tmp_path, "n2", "s-2.jsonl")
    Segments(str(tmp_path / "segs")).write_part("n1", "s-3.jsonl", b"torn")  # a live node's batch, maybe
    assert svc._step()
    assert published == [LinksReport(("n1/s-1.jsonl", "n2/s-2.jsonl"), {"a.test": 2, "b.test": 1})]
    assert Segments(str(tmp_path / "segs")).closed() == []
    kept = sorted(p.name for p in (tmp_path / "segs" / DONE_DIR).rglob("*.jsonl"))
    assert kept == ([] if retention_s == 0 else ["s-1.jsonl", "s-2.jsonl"])
    assert not svc._step()  # nothing left; the .part file is never read
    with SqliteStore(tmp_path / "crawl.db") as store:
        assert list(store.scan_meta("links:")) == [] or [k for k, _ in store.scan_meta("links:")] == ["links:last-mid"]
    svc.close()


def test_a_report_the_broker_refused_leaves_the_round_for_the_next_try(tmp_path: Path) -> None:
    svc = service(tmp_path, [], fail=True)
    segment(tmp_path, "n1", "s-1.jsonl")
    with pytest.raises(ConnectionError):
        svc._step()
    assert [s.key for s in Segments(str(tmp_path / "segs")).closed()] == ["n1/s-1.jsonl"]
    published: list[LinksReport] = []
    svc.publish = published.append
    assert svc._step()  # the same round again, under the same merge id
    ids = {rid for _, rid in fake_pipeline(svc).updates}
    assert len(ids) == 1 and published[0].segments == ("n1/s-1.jsonl",)
    svc.close()


def test_a_failed_round_is_logged_and_run_again_after_a_back_off(tmp_path: Path) -> None:
    published: list[LinksReport] = []
    svc = service(tmp_path, published)
    pipeline = fake_pipeline(svc)
    real = pipeline.update
    calls = {"n": 0}

    def flaky(*a: Any, **kw: Any) -> RoundResult:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("store away")
        return real(*a, **kw)

    pipeline.update = flaky  # type: ignore[method-assign]
    slept: list[float] = []
    svc.sleep = slept.append
    segment(tmp_path, "n1", "s-1.jsonl")
    summary = svc.run(stop=lambda: len(slept) >= 3)
    assert summary["failures"] == 1 and summary["segments"] == 1 and len(published) == 1
    assert slept[0] == svc.poll_s  # the back-off after the failure, then idle polls


def test_two_services_split_the_segments_and_report_each_once(tmp_path: Path) -> None:
    published: list[LinksReport] = []
    for i in range(6):
        segment(tmp_path, f"n{i % 2}", f"s-{i}.jsonl")
    a = service(tmp_path, published, owner="a", max_segments=2)
    b = service(tmp_path, published, owner="b", max_segments=2)
    while a._step() | b._step():
        pass
    keys = [k for r in published for k in r.segments]
    assert sorted(keys) == sorted(f"n{i % 2}/s-{i}.jsonl" for i in range(6)) and len(published) == 3
    assert a.rounds >= 1 and b.rounds >= 1
    a.close()
    b.close()


def test_a_killed_services_round_is_taken_over_by_another(tmp_path: Path) -> None:
    clock = Clock()
    published: list[LinksReport] = []
    segment(tmp_path, "n1", "s-1.jsonl")
    a = service(tmp_path, published, owner="a", clock=clock)
    held = a._start_extract()  # a claims the round, then is killed (nothing released)
    assert held is not None
    b = service(tmp_path, published, owner="b", clock=clock)
    assert not b._step()  # a's lease is live: b waits
    clock.now += 13
    assert b._step() and b.taken_over == 1
    assert published == [LinksReport(("n1/s-1.jsonl",), {"a.test": 2, "b.test": 1})]
    b.close()


def test_an_idle_poll_lists_the_segments_and_asks_the_store_nothing(tmp_path: Path) -> None:
    """Polling is one listing; the store is scanned for claims only when a segment is closed, and for a
    dead service's rounds at most once a second of the service's clock. On a local directory it polls
    every 0.05 s (a hop of the link graph waits for it)."""
    clock = Clock()
    svc = service(tmp_path, [], clock=clock)
    assert svc.poll_s == 0.05
    asked: list[str] = []
    book = svc.book
    real_claims, real_orphans = book.claims, book.orphans

    def claims() -> dict[str, str]:
        asked.append("claims")
        return real_claims()

    def orphans() -> list[str]:
        asked.append("orphans")
        return real_orphans()

    book.claims = claims  # type: ignore[method-assign]
    book.orphans = orphans  # type: ignore[method-assign]
    assert svc._take_round() is None and svc._take_round() is None
    assert asked == ["orphans"]  # once, then not again within the second; no claims scan without segments
    clock.now += 1.5
    segment(tmp_path, "n1", "s-1.jsonl")
    taken = svc._take_round()
    assert taken is not None and taken[0].segments == ("n1/s-1.jsonl",)
    assert asked == ["orphans", "orphans", "claims"]
    svc.close()
