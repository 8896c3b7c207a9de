"""Redirect hops (fetchers.redirects) and the crawl's gate and bookkeeping (pipeline.crawl.redirects,
through CrawlCore): pure decisions and a crawl core on SQLite, no network."""

from __future__ import annotations

from pathlib import Path

from fetchers.records import Batch, FetchResult, UrlTask
from fetchers.redirects import follow_all, next_hop, stop_at_redirects, stopped_target
from pipeline.crawl.core import CrawlCore
from pipeline.crawl.redirects import split
from pipeline.settings import Settings
from pipeline.storage.base import UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint

A, B, C = "http://h.test/a", "http://h.test/b", "http://h.test/c"
TASK = UrlTask(A, fingerprint(A), 0)


def test_next_hop_catches_a_loop_before_the_request_and_asks_the_gate_otherwise() -> None:
    asked: list[str] = []

    def gate(task: UrlTask, target: str) -> bool:
        asked.append(target)
        return target != C

    assert (
        next_hop(TASK, B, "/a", chain=[A, B], hops=1, max_redirects=5, gate=gate).error_class
        == "redirect_loop"
    )
    assert asked == []  # a loop is never the gate's question
    assert next_hop(TASK, A, "/b", chain=[A], hops=0, max_redirects=5, gate=gate).follow == B
    assert next_hop(TASK, B, "c", chain=[A, B], hops=1, max_redirects=5, gate=gate).stop_at == C
    assert (
        next_hop(TASK, A, "/b", chain=[A], hops=5, max_redirects=5, gate=gate).error_class
        == "too_many_redirects"
    )
    assert (
        next_hop(TASK, A, "http://[::1", chain=[A], hops=0, max_redirects=5, gate=gate).error_class
        == "invalid_url"
    )
    off = next_hop(TASK, A, "http://x.example/", chain=[A], hops=0, max_redirects=5, gate=gate,
                   in_scope=lambda u: "h.test" in u)  # fmt: skip
    assert off.error_class == "out_of_scope" and "http://x.example/" not in asked  # refused before the gate
    assert follow_all(TASK, B) and not stop_at_redirects(TASK, B)


def result(*, redirects: list[str], final: str, status: int, error: str = "") -> FetchResult:
    return FetchResult(A, fingerprint(A), 2, final_url=final, redirects=redirects, status=status, error_class=error,
                       serial=1, fetched_at=5.0)  # fmt: skip


def test_split_names_the_requested_urls_and_a_target_left_to_the_link_path() -> None:
    followed = result(redirects=[A, B], final=C, status=200)
    assert stopped_target(followed) == "" and split(followed).requested == (B, C)
    stopped = result(redirects=[A, B], final=C, status=302)
    assert stopped_target(stopped) == C and split(stopped).requested == (B,) and split(stopped).target == C
    loop = result(redirects=[A, B], final=B, status=302, error="redirect_loop")
    assert stopped_target(loop) == "" and split(loop).requested == (B,)
    assert split(result(redirects=[], final=A, status=200)).requested == ()


def make(tmp: Path, *, resume: bool = False) -> CrawlCore:
    return CrawlCore(Settings(), SqliteStore(tmp / "crawl.db"), seeds=["http://h.test/"], out_dir=tmp,
                     clock=lambda: 1_000_000.0, resume=resume)  # fmt: skip


def started(tmp: Path) -> tuple[CrawlCore, Batch, UrlTask]:
    """A crawl core with its first batch out: (core, the batch, its seed task)."""
    core = make(tmp)
    core.register_fetcher("f")
    batch = core.next_batch("f")
    assert batch is not None
    return core, batch, batch.tasks[0]


def test_the_gate_follows_only_new_targets_and_a_chain_settles_what_it_requested(tmp_path: Path) -> None:
    core, batch, seed = started(tmp_path)
    gate = core.redirects.gate
    assert not gate(seed, "http://h.test/")  # known (the seed itself)
    assert not gate(seed, "http://elsewhere.example/x")  # out of scope
    assert gate(seed, A)  # new: followed and claimed
    assert not gate(seed, A)  # claimed by a chain in flight
    assert core.redirects.claimed(fingerprint(A))
    res = FetchResult(seed.url, seed.url_id, 0, final_url=A, redirects=[seed.url], status=200,
                      content_type="text/html", body=b'<a href="/a">again</a>', serial=batch.serial, fetched_at=1.0)  # fmt: skip
    core.on_result(res)
    core.flush()
    assert not core.redirects.claimed(fingerprint(A))
    row = core.store.get_url(A)
    assert row is not None and row.state is UrlState.SKIPPED  # requested in the chain: never queued
    assert core.frontier.pending == 0  # the page's link back to /a is known
    core.close()


def test_a_replayed_chain_settles_its_urls_on_resume(tmp_path: Path) -> None:
    """The journal line of a chain result is replayed after a crash before its flush: its hop and final
    URL are in the crawl db afterwards, so a link to them is never fetched again."""
    core, batch, seed = started(tmp_path)
    core.on_result(FetchResult(seed.url, seed.url_id, 0, final_url=C, redirects=[seed.url, B], status=200,
                               content_type="text/plain", body=b"x", serial=batch.serial, fetched_at=1.0))  # fmt: skip
    core.journal.close()  # a crash: journaled, nothing flushed to the store
    again = make(tmp_path, resume=True)
    assert {u: again.store.get_url(u).state for u in (B, C)} == dict.fromkeys((B, C), UrlState.SKIPPED)  # type: ignore[union-attr]
    again.close()


def test_a_crash_between_a_chains_rows_and_their_outcomes_is_settled_by_the_replay(tmp_path: Path) -> None:
    """With write-behind the rows of a chain's URLs are in the store before their outcomes: a crash
    between the two leaves them PENDING, and the replay must settle them, or the resumed crawl
    fetches them again (seen as a fault trial: /r2/1 and /moved/1 fetched twice)."""
    core, batch, seed = started(tmp_path)
    core.on_result(FetchResult(seed.url, seed.url_id, 0, final_url=C, redirects=[seed.url, B], status=200,
                               content_type="text/plain", body=b"x", serial=batch.serial, fetched_at=1.0))  # fmt: skip
    core.found.publish()  # the rows are written; their outcomes are lost with the crash
    assert core.store.get_url(B).state is UrlState.PENDING  # type: ignore[union-attr]
    core.journal.close()
    again = make(tmp_path, resume=True)
    assert {u: again.store.get_url(u).state for u in (B, C)} == dict.fromkeys((B, C), UrlState.SKIPPED)  # type: ignore[union-attr]
    assert again.frontier.pending == 0
    again.close()


def test_a_kill_between_hops_costs_only_the_hop_in_flight(tmp_path: Path) -> None:
    """The seed answered 302 -> /a and /a answered 302 -> /b; the crawl is killed while /b is asked (the
    chain's result never reaches the journal). On resume the seed and /a are settled, not asked again,
    and only /b (in flight at the kill) is pending, with the chain's hops counted."""
    core, batch, seed = started(tmp_path)
    assert core.redirects.gate(seed, A) and core.redirects.gate(seed, B)  # two hops followed, /b asked
    core.flush()  # a checkpoint while the chain is in flight keeps its hops
    assert core.hops.written
    core.journal.close()  # the kill
    again = make(tmp_path, resume=True)
    states = {u: again.store.get_url(u).state for u in ("http://h.test/", A, B)}  # type: ignore[union-attr]
    assert states == {"http://h.test/": UrlState.DONE, A: UrlState.SKIPPED, B: UrlState.PENDING}
    row = again.store.get_url(B)
    assert row is not None and row.redirect_hops == 2
    assert again.frontier.pending == 1
    assert not (tmp_path / "redirect-hops.jsonl").exists() or not (tmp_path / "redirect-hops.jsonl").read_bytes()
    again.close()


def test_a_chain_that_ends_leaves_no_hops_to_apply(tmp_path: Path) -> None:
    core, batch, seed = started(tmp_path)
    assert core.redirects.gate(seed, A)
    core.on_result(FetchResult(seed.url, seed.url_id, 0, final_url=A, redirects=[seed.url], status=200,
                               content_type="text/plain", body=b"x", serial=batch.serial, fetched_at=1.0))  # fmt: skip
    core.flush()
    assert not core.hops.written  # no chain in flight at the checkpoint: emptied
    core.journal.close()
    again = make(tmp_path, resume=True)
    assert again.store.get_url("http://h.test/").state is UrlState.DONE  # type: ignore[union-attr]
    assert again.store.get_url(A).state is UrlState.SKIPPED  # type: ignore[union-attr]
    again.close()
