"""ParsePool against a real parse process: every result delivered once, prepared as the crawl's own
process would prepare it, deferred callbacks after the results before them, a dead or stalled child
costing nothing but its speed, and a page that kills parsers kept without its links."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable

import pytest

from fetchers import loops
from fetchers.records import FetchResult, Prepared
from pipeline.embedded.childproc import parse_processes_for
from pipeline.embedded.fetchproc import processes_for
from pipeline.embedded.parseproc import ParsePool
from pipeline.harness.testbed.model import Web
from pipeline.harness.testbed.render import Renderer
from pipeline.links import guard, prepare
from pipeline.settings import Settings, load_settings
from pipeline.storage.journal import journal_parts
from pipeline.urls import fingerprint

SETTINGS = load_settings(environ={})


def _pages(n: int) -> list[FetchResult]:
    web = Web(5, 40, seed=2)
    render = Renderer(web)
    out = []
    for k in range(n):
        host, path = k % 5, web.page_path(k % 30)
        url = web.url(host, path)
        reply = render.reply(host, path)
        out.append(FetchResult(url=url, url_id=fingerprint(url), depth=1, final_url=url, status=200,
                               headers={"content-type": reply.content_type}, content_type=reply.content_type,
                               body=reply.body))  # fmt: skip
    return out


def _child_pid(pool: ParsePool) -> int:
    proc = pool._children[0].proc
    assert proc is not None
    return proc.pid


async def _ready(pool: ParsePool) -> None:
    for _ in range(200):
        if pool._children[0].ready:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the parse process never said it was ready")


def _run(
    body: Callable[[ParsePool], object], *, clock: Callable[[], float] | None = None, settings: Settings = SETTINGS,
    loop: str = "asyncio",
) -> None:
    async def main() -> None:
        pool = ParsePool(settings, processes=1, clock=clock or time.monotonic)
        pool.launch()
        await pool.start()
        await _ready(pool)
        try:
            await body(pool)  # type: ignore[misc]
        finally:
            await pool.close()

    loops.run(main(), loop)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])  # fetch.event_loop: the pipe works on either
def test_results_come_back_prepared_and_deferred_callbacks_wait_for_them(loop: str) -> None:
    results = _pages(60)
    events: list[object] = []

    async def body(pool: ParsePool) -> None:
        for r in results[:30]:
            pool.submit(r, events.append)
        pool.defer(lambda: events.append("host done"))
        for r in results[30:]:
            pool.submit(r, events.append)
        await pool.barrier()
        events.append("batch done")

    _run(body, loop=loop)
    delivered = [e for e in events if isinstance(e, FetchResult)]
    assert sorted(id(r) for r in delivered) == sorted(id(r) for r in results)  # each once
    # a deferred callback runs after every result submitted before it
    assert events.index("host done") >= 30 and events[-1] == "batch done"
    for r in delivered:
        assert r.prepared is not None and r.prepared.found is not None
        line, packed = journal_parts(r)
        assert r.prepared.journal_line == line and r.prepared.packed == packed
        assert r.prepared.found == prepare.found_links(r, SETTINGS)
    assert any(r.prepared.found for r in delivered if r.prepared is not None)


def test_results_not_worth_a_child_are_delivered_at_once() -> None:
    failed = FetchResult(url="http://a.test/x", url_id=1, depth=0, error_class="timeout")
    binary = FetchResult(url="http://a.test/b", url_id=2, depth=0, status=200, content_type="image/png", body=b"\x89PNG")
    got: list[FetchResult] = []

    async def body(pool: ParsePool) -> None:
        pool.submit(failed, got.append)
        pool.submit(binary, got.append)
        assert got == [failed, binary]  # synchronously, unprepared: the core journals them itself
        assert failed.prepared is None and binary.prepared is None

    _run(body)


def test_a_killed_child_loses_nothing_and_is_replaced() -> None:
    results = _pages(40)
    got: list[FetchResult] = []

    async def body(pool: ParsePool) -> None:
        pid = _child_pid(pool)
        os.kill(pid, signal.SIGSTOP)  # it holds what it is sent ...
        for r in results[:20]:
            pool.submit(r, got.append)
        await asyncio.sleep(0.1)
        os.kill(pid, signal.SIGKILL)  # ... and dies holding it, between pages
        await asyncio.wait_for(pool.barrier(), 20)
        assert _child_pid(pool) != pid  # a new child took its place, and what the dead one held
        for r in results[20:]:
            pool.submit(r, got.append)
        await asyncio.wait_for(pool.barrier(), 10)
        assert pool.deaths == 1 and pool.quarantined == 0

    _run(body)
    assert sorted(id(r) for r in got) == sorted(id(r) for r in results)
    assert all(r.prepared is not None and r.prepared.found is not None for r in got)  # none prepared here
    assert not any(r.prepared.parse_error for r in got if r.prepared is not None)


def test_a_stalled_child_is_replaced_after_the_stall_limit() -> None:
    now = [0.0]
    results = _pages(10)
    got: list[FetchResult] = []

    async def body(pool: ParsePool) -> None:
        pid = _child_pid(pool)
        os.kill(pid, signal.SIGSTOP)
        for r in results:
            pool.submit(r, got.append)
        await asyncio.sleep(1.5)  # the watchdog looks once a second; the stall limit is not reached
        assert got == []
        now[0] += pool.stall_s + 1
        await asyncio.wait_for(pool.barrier(), 20)
        assert len(got) == 10 and _child_pid(pool) != pid

    _run(body, clock=lambda: now[0])
    assert all(r.prepared is not None and r.prepared.found is not None for r in got)  # by the new child


def _bomb(depth: int, *, host: str = "bomb.test") -> FetchResult:
    """A page whose parse costs the square of its depth (pipeline/links/guard.py): seconds of CPU."""
    url = f"http://{host}/nested"
    body = b"<html><body>" + b"<div>" * depth + b'<a href="/x">x</a>' + b"</div>" * depth
    return FetchResult(url=url, url_id=fingerprint(url), depth=0, final_url=url, status=200,
                       headers={"content-type": "text/html"}, content_type="text/html", body=body)  # fmt: skip


def test_a_page_past_the_cpu_limit_is_kept_without_links_after_two_deaths() -> None:
    """A parse past ``fetch.parse_cpu_limit_s`` ends its child (SIGPROF); the page is tried once more
    in a new child, then delivered with its journal line and body, no links, and the reason. The pages
    sent with it come back prepared."""
    settings = SETTINGS.with_overrides({"fetch": {"parse_cpu_limit_s": 0.3}})
    bomb, pages = _bomb(60_000), _pages(12)  # 60,000 nested <div>: about 2 s of CPU here
    got: list[FetchResult] = []

    async def body(pool: ParsePool) -> None:
        for r in [*pages[:6], bomb, *pages[6:]]:
            pool.submit(r, got.append)
        await asyncio.wait_for(pool.barrier(), 60)
        assert pool.deaths == 2 and pool.quarantined == 1

    _run(body, settings=settings)
    assert sorted(id(r) for r in got) == sorted(id(r) for r in [bomb, *pages])
    assert bomb.prepared is not None and bomb.prepared.links == [] and bomb.prepared.found is None
    assert bomb.prepared.parse_error.startswith("parse_failed: the parse used more than 0.3 s of CPU, 2 times")
    line, packed = journal_parts(bomb)
    assert bomb.prepared.journal_line == line and bomb.prepared.packed == packed  # the page itself is kept
    for r in pages:
        assert r.prepared is not None and r.prepared.found == prepare.found_links(r, SETTINGS)


def test_a_storm_of_hostile_pages_never_sends_parsing_to_the_crawls_process() -> None:
    """Four parser-killing pages (on four hosts, so the per-host cutoff never applies) cost eight deaths,
    more than a child's restart budget of six a minute. Deaths the guard blames on a page are bounded by
    the strikes and do not spend the budget, so every bomb ends quarantined by a child and every other
    page comes back prepared. Before, the seventh death left no child: the fourth bomb, and every page
    after it, went to the crawl's own process, where the bomb would stall or kill the crawl."""
    settings = SETTINGS.with_overrides({"fetch": {"parse_cpu_limit_s": 0.3}})
    bombs = [_bomb(60_000, host=f"bomb{i}.test") for i in range(4)]
    pages = _pages(8)
    got: list[FetchResult] = []

    async def body(pool: ParsePool) -> None:
        for r in [pages[0], *bombs, *pages[1:]]:
            pool.submit(r, got.append)
        await asyncio.wait_for(pool.barrier(), 120)
        assert pool.deaths == 8 and pool.quarantined == 4 and pool.local == 0

    _run(body, settings=settings)
    assert sorted(id(r) for r in got) == sorted(id(r) for r in [*bombs, *pages])
    for bomb in bombs:
        assert bomb.prepared is not None and bomb.prepared.parse_error.startswith("parse_failed:"), bomb.url
    assert all(r.prepared is not None and r.prepared.found is not None for r in pages)


def test_a_child_out_of_restarts_is_started_again_when_its_minute_is_over() -> None:
    """The restart budget is per minute: a child that used it up (deaths with no page in hand) is
    started again once the window has passed, by the pool's once-a-second watch. Before, nothing
    started it again, and the crawl's process prepared every result for the rest of the crawl."""
    now = [0.0]
    pages = _pages(6)
    got: list[FetchResult] = []

    async def body(pool: ParsePool) -> None:
        child = pool._children[0]
        for _ in range(child.budget.deaths):
            child.budget.died(now[0])  # six deaths between pages: the budget is spent
        os.kill(_child_pid(pool), signal.SIGKILL)
        for _ in range(200):
            if child.sock is None:
                break
            await asyncio.sleep(0.01)
        assert child.sock is None  # not restarted: no budget left
        now[0] += child.budget.window_s + 1  # a minute later
        await _ready(pool)  # the watch started it again
        for r in pages:
            pool.submit(r, got.append)
        await asyncio.wait_for(pool.barrier(), 60)

    _run(body, clock=lambda: now[0])
    assert all(r.prepared is not None and r.prepared.found is not None for r in pages)


async def _in_hand(pool: ParsePool, url: str, *, not_pid: int) -> int:
    """The child's pid once its marker says it is parsing ``url`` (a child other than ``not_pid``)."""
    for _ in range(1000):
        hand = guard.culprit(pool._children[0].marker)
        proc = pool._children[0].proc
        if hand is not None and hand.url == url and proc is not None and proc.pid != not_pid:
            return proc.pid
        await asyncio.sleep(0.01)
    raise AssertionError(f"the child never started parsing {url}")


@pytest.mark.parametrize("crashes", [1, 2])
def test_a_child_crashing_on_a_page_blames_that_page_only(crashes: int) -> None:
    """A child that dies of SIGSEGV while its marker names a page (as lexbor's crashes do) gives that
    page a strike: one strike is bad luck (the page is parsed again, in a new child), two make it a
    hostile page. The CPU limit is off, so the deaths are the signals only."""
    settings = SETTINGS.with_overrides({"fetch": {"parse_cpu_limit_s": 0.0}})
    bomb, pages = _bomb(40_000), _pages(8)  # long enough a parse to be caught in it
    got: list[FetchResult] = []

    async def body(pool: ParsePool) -> None:
        for r in [*pages[:4], bomb, *pages[4:]]:
            pool.submit(r, got.append)
        pid = 0
        for _ in range(crashes):
            pid = await _in_hand(pool, bomb.url, not_pid=pid)
            os.kill(pid, signal.SIGSEGV)
        await asyncio.wait_for(pool.barrier(), 60)
        assert pool.deaths == crashes and pool.quarantined == crashes - 1

    _run(body, settings=settings)
    assert sorted(id(r) for r in got) == sorted(id(r) for r in [bomb, *pages])
    assert all(r.prepared is not None and r.prepared.found is not None for r in pages)
    assert bomb.prepared is not None
    if crashes == 1:
        assert bomb.prepared.found == [("http://bomb.test/x", fingerprint("http://bomb.test/x"))]
        assert bomb.prepared.parse_error == ""
    else:
        assert bomb.prepared.links == [] and bomb.prepared.parse_error == (
            "parse_failed: the parser process died of SIGSEGV, 2 times; its links were not extracted"
        )


# One core still gets a parse process (a page that kills lexbor must not kill the crawl); 0 asks for none.
@pytest.mark.parametrize(("wanted", "fetch_processes", "cores", "expected"),
                         [(-1, 0, 2, 1), (-1, 0, 1, 1), (-1, 0, 16, 2), (3, 0, 2, 3), (-1, 1, 2, 0), (0, 0, 8, 0)])  # fmt: skip
def test_parse_processes_for(
    monkeypatch: pytest.MonkeyPatch, wanted: int, fetch_processes: int, cores: int, expected: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)))
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # the machine's count: not what a pinned crawl may use
    settings = SETTINGS.with_overrides({"fetch": {"parse_processes": wanted}})
    assert parse_processes_for(settings, fetch_processes=fetch_processes) == expected


@pytest.mark.parametrize(("wanted", "cores", "expected"), [(-1, 1, 0), (-1, 2, 0), (-1, 3, 2), (-1, 16, 4), (1, 2, 1)])
def test_fetch_processes_for(monkeypatch: pytest.MonkeyPatch, wanted: int, cores: int, expected: int) -> None:
    """-1 never picks one fetch process (no faster than none, and its links would be parsed unguarded)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)))
    settings = SETTINGS.with_overrides({"fetch": {"processes": wanted}})
    assert processes_for(settings) == expected


def test_results_and_what_children_return_pickle_by_their_fields() -> None:
    """Parse and fetch processes pickle every result: records.FetchResult, Timings and Prepared pickle
    as their field values (cheaper than a slots dataclass's __getstate__) and come back equal."""
    import pickle

    from fetchers.records import Prepared, Timings

    res = _pages(1)[0]
    res.timings = Timings(dns_s=0.1, connect_s=0.2, ttfb_s=0.3, total_s=0.4)
    res.redirects, res.retry_after_s, res.nofollow = ["http://a.test/old"], 2.5, True
    res.prepared = prepare.prepare_found(res, SETTINGS)
    back = pickle.loads(pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == res and back.timings == res.timings
    assert isinstance(back.prepared, Prepared) and back.prepared == res.prepared  # compare=False: check it apart


def test_a_host_past_its_parse_failed_pages_is_not_parsed_any_more() -> None:
    """With fetch.parse_failed_per_host = 1, once one page of a host was quarantined, its host's later
    pages are delivered at once, body kept, no links, with the host's reason; no child dies for them, and
    other hosts' pages are parsed as before."""
    settings = SETTINGS.with_overrides({"fetch": {"parse_cpu_limit_s": 0.3, "parse_failed_per_host": 1}})
    bomb, other = _bomb(60_000), _pages(3)
    same_host = FetchResult(url="http://bomb.test/plain", url_id=fingerprint("http://bomb.test/plain"), depth=0,
                            final_url="http://bomb.test/plain", status=200, content_type="text/html",
                            body=b'<a href="/y">y</a>')  # fmt: skip
    got: list[FetchResult] = []

    async def body(pool: ParsePool) -> None:
        pool.submit(bomb, got.append)
        await asyncio.wait_for(pool.barrier(), 60)
        assert pool.deaths == 2
        pool.submit(same_host, got.append)
        assert got[-1] is same_host  # at once, not through a child
        for r in other:
            pool.submit(r, got.append)
        await asyncio.wait_for(pool.barrier(), 20)
        assert pool.deaths == 2 and pool.quarantined == 2

    _run(body, settings=settings)
    assert same_host.prepared is not None and same_host.prepared.links == []
    assert same_host.prepared.parse_error == guard.host_error(1)
    assert all(r.prepared is not None and r.prepared.found == prepare.found_links(r, SETTINGS) for r in other)


def test_links_the_seen_set_holds_for_good_are_left_out_of_what_comes_back() -> None:
    """``note_known`` rides with the next results to the child, which drops those links from ``found``
    (the crawl's process would drop them after a look-up); the other links come back as before."""
    results = _pages(20)
    first: list[FetchResult] = []
    again: list[FetchResult] = []

    async def body(pool: ParsePool) -> None:
        for r in results[:10]:
            pool.submit(r, first.append)
        await pool.barrier()
        known = {uid for r in first if r.prepared and r.prepared.found for _, uid in r.prepared.found[::2]}
        pool.note_known(sorted(known))
        for r in results[10:]:
            pool.submit(r, again.append)
        await pool.barrier()
        fewer = []
        for r in again:
            assert r.prepared is not None and r.prepared.found is not None
            whole = prepare.found_links(r, SETTINGS)
            assert r.prepared.found == [link for link in whole if link[1] not in known]
            fewer.append(len(r.prepared.found) < len(whole))
        assert any(fewer)

    _run(body)


def test_known_links_keep_two_generations() -> None:
    from pipeline.embedded.parsechild import KnownLinks

    known = KnownLinks(half=3)
    known.add([1, 2])
    known.add([3, 4])  # the young generation would pass 3: it becomes the old one
    prepared = Prepared(b"", found=[("a", 1), ("b", 3), ("c", 5)])
    assert known.drop_from(prepared).found == [("c", 5)]
    known.add([6, 7])  # 1 and 2 are forgotten now: only a look-up more for the crawl's process
    assert known.drop_from(Prepared(b"", found=[("a", 1), ("b", 3), ("d", 6)])).found == [("a", 1)]
