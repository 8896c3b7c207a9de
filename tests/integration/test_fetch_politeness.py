"""Politeness, judged from what servers saw: the testbed's access log (Crawl-delay gaps, per-host
concurrency, zero disallowed paths) and a local recording server (per-IP and global concurrency,
Retry-After, robots 5xx/unreachable back-off, User-Agent, read timeouts and retries)."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fetchers import engine
from fetchers.aio import AioFetcher
from fetchers.h1 import H1Fetcher
from fetchers.records import FetchResult
from fetchers.report import DEFERRED, ROBOTS_UNAVAILABLE, THROTTLED
from fetchers.testing import LocalSite, StaticResolver, bed_resolver, bed_settings, make_batch, run_urls
from fetchers.threaded import ThreadedFetcher
from pipeline.harness.testbed.model import CRAWL_DELAY_S, CRAWL_DELAY_SLOT, N_SPECIAL, Web
from pipeline.settings import Settings

pytestmark = pytest.mark.integration
FETCHERS = pytest.mark.parametrize("fetcher_cls", [AioFetcher, ThreadedFetcher, H1Fetcher], ids=["aio", "threaded", "h1"])
# Arrival times at the server jitter by the client loop's latency; the gap is enforced between starts.
JITTER_S = 0.05


def _max_concurrent(spans: list[tuple[float, float]]) -> int:
    """How many of the server's [start, end) spans were open at once, at most."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _fetch(fetcher_cls: type, settings: Settings, resolver: Any, urls: list[str]) -> tuple[dict[str, FetchResult], Any]:
    async def go() -> Any:
        async with fetcher_cls(settings, fetcher_id="p", resolver=resolver) as f:
            return await run_urls(f, urls)

    return asyncio.run(go())


@FETCHERS
def test_crawl_delay_gaps_in_access_log(fetcher_cls: type, make_testbed: Callable[..., Any]) -> None:
    tb = make_testbed(hosts=8, pages=12)
    host = CRAWL_DELAY_SLOT
    settings = bed_settings(tb.dns_server, politeness={"min_host_delay_s": 0.0, "per_host_concurrency": 4})
    urls = [tb.url(host, Web(8, 12).page_path(m)) for m in range(8)]
    begin = tb.mark("begin")
    results, report = _fetch(fetcher_cls, settings, bed_resolver(settings), urls)
    log = [e for e in tb.log_between(begin, tb.mark("end")) if e["host"] == f"site{host}.crawl.test"]
    assert all(r.ok for r in results.values())
    assert len(log) == len(urls) + 1  # + robots.txt
    times = sorted(e["t"] for e in log)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= CRAWL_DELAY_S - JITTER_S, gaps
    assert 0 < report.host_delays[urls[0].split("/")[2]] <= CRAWL_DELAY_S


@FETCHERS
def test_per_host_concurrency_in_access_log(
    fetcher_cls: type, make_testbed: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "URLS_PER_CONNECTION", 1)  # a worker per URL: only the limit holds them back
    tb = make_testbed(hosts=8, pages=4)
    slow = tb.url(4, "/slow")  # answered 1.5 s after the server has its head
    settings = bed_settings(tb.dns_server, politeness={"min_host_delay_s": 0.0, "per_host_concurrency": 2})
    begin = tb.mark("begin")

    async def go() -> None:
        async with fetcher_cls(settings, fetcher_id="p", resolver=bed_resolver(settings)) as f:
            got: list[FetchResult] = []
            await f.fetch_batch(make_batch([slow] * 4), got.append)
            assert [r.status for r in got] == [200] * 4

    asyncio.run(go())
    # The server's own spans (its start and end of each request): never more than 2 open at once.
    spans = [(e["t"], e["end"]) for e in tb.log_between(begin, tb.mark("end")) if e["path"] == "/slow"]
    assert len(spans) == 4 and _max_concurrent(spans) == 2, spans


def test_zero_disallowed_paths_fetched(testbed_small: Any) -> None:
    tb = testbed_small
    web = Web(tb.hosts, tb.pages, port=tb.port)
    urls = []
    for i in range(tb.hosts):
        for k in range(N_SPECIAL):
            urls += [web.url(i, f"/private/{k}"), web.url(i, f"/agentonly/{k}")]
        urls.append(web.url(i, "/"))
    settings = bed_settings(tb.dns_server, politeness={"min_host_delay_s": 0.0, "max_crawl_delay_s": 0.0})
    begin = tb.mark("begin")
    results, _ = _fetch(AioFetcher, settings, bed_resolver(settings), urls)
    log = tb.log_between(begin, tb.mark("end"))
    fetched = {(e["host"], e["path"]) for e in log}
    for i in range(tb.hosts):
        robots = web.robots_txt(i) or ""
        name = f"site{i}.crawl.test"
        for k in range(N_SPECIAL):
            private_blocked = "Disallow: /private/" in robots and "User-agent: crawlfleet" not in robots
            agent_blocked = "Disallow: /agentonly/" in robots
            if private_blocked:
                assert (name, f"/private/{k}") not in fetched
                assert results[web.url(i, f"/private/{k}")].error_class == "robots_blocked"
            if agent_blocked:
                assert (name, f"/agentonly/{k}") not in fetched
    assert sum(1 for r in results.values() if r.error_class == "robots_blocked") > 0


# -- a local recording server --------------------------------------------------------------------------
TABLE = {
    "a.local.test": ["127.0.20.1"], "b.local.test": ["127.0.20.1"], "c.local.test": ["127.0.20.1"],
    "d.local.test": ["127.0.20.2"], "gone.local.test": ["127.0.20.3"],
}  # fmt: skip


def _local(
    fetcher_cls: type,
    scenario: Callable[[Any, LocalSite], Awaitable[None]],
    *,
    politeness: dict[str, Any] | None = None,
    fetch: dict[str, Any] | None = None,
) -> None:
    site = LocalSite(ips=("127.0.20.1", "127.0.20.2"))
    settings = Settings().with_overrides(
        {
            "security": {"allow_networks": ("127.0.20.0/24",)},
            "politeness": {"min_host_delay_s": 0.0, **(politeness or {})},
            "fetch": {"retries": 1, "retry_backoff_s": 0.05, "read_timeout_s": 0.5, **(fetch or {})},
        }
    )

    async def go() -> None:
        await site.start()
        try:
            async with fetcher_cls(settings, fetcher_id="p", resolver=StaticResolver(TABLE)) as f:
                await scenario(f, site)
        finally:
            await site.stop()

    asyncio.run(go())


@FETCHERS
def test_per_ip_and_per_host_limits(fetcher_cls: type) -> None:
    async def scenario(f: Any, site: LocalSite) -> None:
        urls = [site.url(f"{h}.local.test", "127.0.20.1", f"/slow?ms=80&n={n}") for h in "abc" for n in range(6)]
        _, report = await run_urls(f, urls)
        assert report.pages == 18
        assert site.max_ip["127.0.20.1"] == 2  # three hosts on one address share its two slots
        assert max(site.max_host.values()) <= 2

    _local(fetcher_cls, scenario, politeness={"per_host_concurrency": 3, "per_ip_concurrency": 2})


def test_global_concurrency_shared_by_concurrent_batches() -> None:
    async def scenario(f: Any, site: LocalSite) -> None:
        a = [site.url("a.local.test", "127.0.20.1", f"/slow?ms=60&n={n}") for n in range(12)]
        d = [site.url("d.local.test", "127.0.20.2", f"/slow?ms=60&n={n}") for n in range(12)]
        free: list[int] = []
        got: list[FetchResult] = []

        def on_result(r: FetchResult) -> None:
            got.append(r)
            free.append(f.free_slots)

        assert f.free_slots == 6  # 2 x concurrency: one round of backlog
        await asyncio.gather(
            f.fetch_batch(make_batch(a, serial=1), on_result), f.fetch_batch(make_batch(d, serial=2), on_result)
        )
        assert len(got) == 24 and all(r.ok for r in got) and {r.serial for r in got} == {1, 2}
        assert site.max_total == 3  # two batches, one global limit
        assert free[0] == 0 and f.free_slots == 6  # S1's q: URLs accepted but not finished count as busy

    _local(AioFetcher, scenario, politeness={"per_host_concurrency": 8, "per_ip_concurrency": 8}, fetch={"concurrency": 3})


@FETCHERS
def test_retry_after(fetcher_cls: type) -> None:
    async def scenario(f: Any, site: LocalSite) -> None:
        short = site.url("a.local.test", "127.0.20.1", "/ra?status=429&after=1&times=1")
        res, _ = await run_urls(f, [short])
        hits = site.hits_for("/ra?status=429")
        assert res[short].ok and len(hits) == 2 and hits[1].start - hits[0].start >= 1.0 - JITTER_S

        date = email.utils.formatdate(time.time() + 120, usegmt=True)
        long = site.url("d.local.test", "127.0.20.2", f"/ra?status=503&after={date.replace(' ', '%20')}&times=5")
        other = site.url("d.local.test", "127.0.20.2", "/after")
        got: list[FetchResult] = []
        report = await f.fetch_batch(make_batch([long, other]), got.append)
        by = {r.url: r for r in got}
        assert by[long].error_class == THROTTLED and by[long].status == 503
        assert 100 < (by[long].retry_after_s or 0) <= 121
        assert by[other].error_class == DEFERRED  # the host is in back-off: not contacted
        assert not site.hits_for("/after")
        assert {t.url for t in report.unfinished} == {long, other} and report.pages == 0
        assert 100 < report.host_delays[long.split("/")[2]] <= 121

    _local(fetcher_cls, scenario, politeness={"per_host_concurrency": 1})  # 'other' starts after the 503


@FETCHERS
def test_robots_5xx_and_unreachable_back_off(fetcher_cls: type) -> None:
    async def scenario(f: Any, site: LocalSite) -> None:
        site.robots["a.local.test"] = (503, "busy")
        site.robots["d.local.test"] = (200, "User-agent: *\nDisallow: /no\n")
        a = site.url("a.local.test", "127.0.20.1", "/page")
        gone = "http://gone.local.test:9/page"  # resolves, but nothing listens: robots unreachable
        d_ok, d_no = site.url("d.local.test", "127.0.20.2", "/yes"), site.url("d.local.test", "127.0.20.2", "/no")
        res, report = await run_urls(f, [a, gone, d_ok, d_no])
        assert res[a].error_class == ROBOTS_UNAVAILABLE and res[gone].error_class == ROBOTS_UNAVAILABLE
        assert {t.url for t in report.unfinished} == {a, gone}
        assert 590 < report.host_delays[a.split("/")[2]] <= 600  # robots_5xx_retry_s
        assert not site.hits_for("/page") and not site.hits_for("/no")
        assert res[d_ok].ok and res[d_no].error_class == "robots_blocked"
        # A second batch inside the back-off does not ask for robots.txt again.
        n_robots = len(site.hits_for("/robots.txt"))
        res2, _ = await run_urls(f, [a])
        assert res2[a].error_class == ROBOTS_UNAVAILABLE and len(site.hits_for("/robots.txt")) == n_robots

    _local(fetcher_cls, scenario)


@FETCHERS
def test_user_agent_timeouts_retries_and_x_robots_tag(fetcher_cls: type) -> None:
    async def scenario(f: Any, site: LocalSite) -> None:
        ok = site.url("a.local.test", "127.0.20.1", "/hello")
        stall = site.url("d.local.test", "127.0.20.2", "/wait?ms=1500")  # past read_timeout_s=0.5
        res, _ = await run_urls(f, [ok, stall])
        ua = site.hits_for("/hello")[0].user_agent
        assert ua == Settings().fetch.user_agent and "+http" in ua and "@" in ua
        assert res[stall].error_class == "timeout" and res[stall].status == 0
        assert len(site.hits_for("/wait")) == 2  # no response head yet: retried once (retries=1)
        tagged = site.url("a.local.test", "127.0.20.1", "/xrobots?v=noindex,%20nofollow")
        other = site.url("a.local.test", "127.0.20.1", "/xrobots?v=otherbot:%20noindex")
        res, _ = await run_urls(f, [tagged, other])
        assert (res[tagged].noindex, res[tagged].nofollow) == (True, True)
        assert (res[other].noindex, res[other].nofollow) == (False, False)

    _local(fetcher_cls, scenario)


@FETCHERS
def test_a_slow_url_does_not_hold_the_other_hosts_of_its_batch(
    fetcher_cls: type, make_testbed: Callable[..., Any]
) -> None:
    """``on_host_done`` ends a host's lease once all its URLs have results, while a slow URL of another
    host keeps the batch open; the slow host is released only with the batch."""
    tb = make_testbed(hosts=8, pages=4)
    web = Web(8, 4)
    slow = tb.url(4, "/slow")  # answers 1.5 s after it is logged
    quick = [tb.url(h, web.page_path(0)) for h in (1, 2)]
    settings = bed_settings(tb.dns_server, politeness={"min_host_delay_s": 0.0})
    events: list[tuple[str, str]] = []

    def on_result(r: FetchResult) -> None:
        events.append(("result", r.url))

    def on_host_done(host: str, delay_s: float, ip: str) -> None:
        assert ip.startswith("127.0.10.")
        events.append(("host_done", host))

    async def go() -> None:
        async with fetcher_cls(settings, fetcher_id="p", resolver=bed_resolver(settings)) as f:
            await f.fetch_batch(make_batch([slow, *quick]), on_result, on_host_done=on_host_done)

    asyncio.run(go())
    done = [what for kind, what in events if kind == "host_done"]
    assert sorted(done) == sorted(u.split("/")[2] for u in quick)  # not the slow URL's host
    slow_at = events.index(("result", slow))
    for url in quick:  # each host's release comes after its result and before the slow URL ends
        assert events.index(("result", url)) < events.index(("host_done", url.split("/")[2])) < slow_at
