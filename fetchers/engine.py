"""The fetch engine shared by the aiohttp and the thread-pool fetchers: batches, robots, scope, SSRF
checks, redirects, retries, Retry-After and pacing. A ``Transport`` performs one HTTP exchange (no
redirects followed); everything else is here, so both fetchers obey exactly the same rules.

Per URL: for each hop -> scope -> resolve (through the guarded resolver; IP literals checked directly)
-> robots of that hop's origin -> paced exchange (retried with exponential back-off only when the
transport says the error is retryable or the status is a 5xx other than 501) -> follow a redirect (when the ``RedirectGate`` says so: ``fetchers.redirects``) or
finish. Every failure becomes a FetchResult with ``error_class``; nothing raises out of ``run_batch``.
With an ``archive``, every exchange the transport captured (each hop, retry and robots.txt) is handed
to it as it completes (``fetchers.wire``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from collections.abc import Callable

from fetchers.batchctx import BatchCtx, Fail
from fetchers.conditional import REQUEST_HEADERS, conditional_headers
from fetchers.exchange import (
    REDIRECT_STATUSES,
    Exchange,
    Transport,
    dns_error_class,
    is_ip_literal,
    split_host,
)
from fetchers.guard import GuardedResolver, SsrfBlocked
from fetchers.hostworker import HostWorker
from fetchers.politeness import Pacer
from fetchers.records import Batch, FetchResult, Timings, UrlTask
from fetchers.redirects import RedirectGate, follow_all, next_hop
from fetchers.report import (
    DNS_RETRY_S,
    DNS_TRANSIENT,
    LEASE_LAPSED,
    ROBOTS_UNAVAILABLE,
    THROTTLED,
    BatchReport,
)
from fetchers.retrying import paced_exchange
from fetchers.robots import (
    MAX_ROBOTS_BYTES,
    MAX_ROBOTS_REDIRECTS,
    OriginFailed,
    RobotsCache,
    RobotsShare,
    origin_of,
    robots_url,
    x_robots_tag,
)
from fetchers.robotsnote import RobotsNote
from fetchers.tls import CERT_ERRORS
from fetchers.wire import Archive
from pipeline.settings import Settings
from pipeline.urls import Scope, host_of, join, normalize

log = logging.getLogger(__name__)

_IP_TTL_S = 60.0
BACKLOG = 2  # free_slots counts up to 2 x concurrency URLs
URLS_PER_CONNECTION = 8  # a batch opens one more connection to a host per this many of its URLs


class Engine:
    """Shared state of one fetcher process: pacer, robots cache, host->IP map. Batches run concurrently."""

    def __init__(
        self,
        settings: Settings,
        *,
        fetcher_id: str,
        transport: Transport,
        resolver: GuardedResolver,
        scope: Scope | None,
        clock: Callable[[], float],
        archive: Archive | None = None,
        redirect_gate: RedirectGate = follow_all,
        robots_share: RobotsShare | None = None,
    ) -> None:
        """``archive`` gets every exchange the transport captured (each hop, retry and robots.txt).
        ``redirect_gate`` is asked before each redirect hop is requested (``fetchers.redirects``).
        ``robots_share``: robots.txt answers shared with other nodes (``fetchers.robots``)."""
        self.settings = settings
        self.archive = archive
        self.redirect_gate = redirect_gate
        self.fetcher_id = fetcher_id
        self.transport = transport
        self.resolver = resolver
        self.scope = scope
        self.clock = clock
        f, p = settings.fetch, settings.politeness
        self.pacer = Pacer(p, concurrency=f.concurrency, clock=clock)
        self.robots = RobotsCache(p, agent=f.robots_agent, clock=clock, share=robots_share)
        self._ips: dict[str, tuple[str, float]] = {}
        self._pending = 0
        self._max_body = f.max_body_bytes
        self._keep_all = f.keep_body
        self._parse_types = frozenset(f.parse_content_types)

    @property
    def free_slots(self) -> int:
        """S1's q: URLs this fetcher can take now. Capacity is BACKLOG x concurrency accepted-but-unfinished
        URLs: one round queued behind the sockets keeps them busy while per-host limits hold URLs back."""
        return max(0, BACKLOG * self.settings.fetch.concurrency - self._pending)

    # -- batches --------------------------------------------------------------------------------------
    async def run_batch(
        self,
        batch: Batch,
        on_result: Callable[[FetchResult], None],
        *,
        fence: Callable[[], bool] | None = None,
        on_host_done: Callable[[str, float, str], None] | None = None,
    ) -> BatchReport:
        """Fetch every task. ``fence`` is asked before each URL starts; once it says False, the URLs not
        yet started are handed back unfetched (``LEASE_LAPSED``, retried later by whoever holds them).

        ``on_host_done(host, delay_s, ip)`` is called, while other hosts of the batch are still being
        fetched, for each host whose URLs all have a final result (none handed back), with the delay
        the batch's report would give it: the host's lease can end there, so that one slow URL (a
        retried 5xx, a slow server) does not hold every other host of its batch until the batch ends.
        """
        t0 = self.clock()
        ctx = BatchCtx(batch, on_result, fence=fence, on_host_done=on_host_done)
        queues: dict[str, deque[UrlTask]] = {}
        for task in batch.tasks:
            try:
                host = host_of(task.url)
            except ValueError:
                host = ""
            queues.setdefault(host, deque()).append(task)
        if on_host_done is not None:
            ctx.host_left = {host: len(q) for host, q in queues.items()}
        per_host = max(1, self.settings.politeness.per_host_concurrency)
        workers = [
            self._worker(host, q, ctx)
            for host, q in queues.items()
            for _ in range(_workers_for(len(q), per_host, host))
        ]
        self._pending += len(batch.tasks)
        left = [len(batch.tasks)]
        try:
            await asyncio.gather(*(w.run(left) for w in workers))
        finally:
            self._pending -= left[0]
        now = self.clock()
        delays = {host: self.host_delay(host, ctx) for host in queues if host}
        return BatchReport(
            serial=batch.serial,
            fetcher_id=self.fetcher_id,
            pages=ctx.pages,
            elapsed_s=now - t0,
            host_delays=delays,
            host_ips=ctx.host_ips,
            unfinished=ctx.unfinished,
        )

    def _worker(self, host: str, queue: deque[UrlTask], ctx: BatchCtx) -> HostWorker:
        return HostWorker(self, host, queue, ctx)

    def host_delay(self, host: str, ctx: BatchCtx) -> float:
        """Seconds before ``host`` may be contacted again: its pacing gap or a robots.txt back-off."""
        wait = self.pacer.wait_for(host)
        origin = ctx.origins.get(host)
        if origin:
            wait = max(wait, self.robots.remaining_block(origin))
        return round(wait, 3)

    # -- one URL --------------------------------------------------------------------------------------
    def _result(self, task: UrlTask, ctx: BatchCtx, error_class: str = "", message: str = "") -> FetchResult:
        return FetchResult(
            task.url, task.url_id, task.depth, final_url=task.url, error_class=error_class,
            error_message=message, serial=ctx.batch.serial, fetcher_id=self.fetcher_id, fetched_at=time.time(),
            redirect_hops=task.redirect_hops, link_meta=task.link_meta,
        )  # fmt: skip

    async def fetch_task(self, task: UrlTask, ctx: BatchCtx) -> FetchResult:
        t0 = self.clock()
        url = task.url
        chain: list[str] = []  # every URL of the chain that was requested and redirected
        dns_s = 0.0
        max_redirects = self.settings.fetch.max_redirects
        hop = task.redirect_hops  # a chain that is a run of tasks counts its hops from the first one
        notes: list[RobotsNote] = []  # robots.txt loads of this URL's origins, reported once each
        made: list[tuple[float, int]] = []  # every request this URL cost: hops and retries
        while True:
            res = None
            try:
                host = host_of(url) if url.startswith(("http://", "https://")) else ""
                if not host:
                    raise Fail("invalid_url", f"not an absolute URL: {url[:200]}")
                if self.scope is not None and not self.scope.allows(url):
                    raise Fail("out_of_scope", f"{url[:200]} is out of scope")
                cached = self._ips.get(host)
                if cached is not None and host not in ctx.failed_hosts and cached[1] > t0:
                    ip = ctx.host_ips[host] = cached[0]  # the common case, without a coroutine
                else:
                    t_dns = self.clock()
                    ip = await self.ip_of(host, ctx)
                    dns_s += self.clock() - t_dns
                if self.settings.politeness.obey_robots:
                    origin = origin_of(url)
                    ctx.origins[host] = origin
                    rules = self.robots.fresh(origin)
                    if rules is None:
                        if ctx.fence is not None and not ctx.fence():  # robots.txt would be a new request
                            raise Fail(LEASE_LAPSED, "not sent: the batch was stopped")
                        rules = await self.robots.get(origin, self._fetch_robots)
                    if (note := self.robots.take_news(origin)) is not None:
                        notes.append(note)
                    if rules.error_class:  # the origin fails for every URL (its certificate): this one too
                        raise Fail(rules.error_class, f"{origin}: {rules.message}")
                    if rules.unreachable:
                        raise Fail(
                            ROBOTS_UNAVAILABLE, f"robots.txt of {origin} unavailable (status {rules.status})"
                        )
                    if not rules.allows(url):
                        raise Fail("robots_blocked", f"disallowed by {origin}/robots.txt")
                    self.pacer.set_crawl_delay(host, rules.crawl_delay)
                # A re-fetch's first hop is conditional (a redirect target is another resource).
                sent = REQUEST_HEADERS.set(conditional_headers(task) if url == task.url else None)
                try:
                    ex = await self.exchange(url, host, ip, self._max_body, fence=ctx.fence, sent=made)
                finally:
                    REQUEST_HEADERS.reset(sent)
            except Fail as fail:
                res = self._result(task, ctx, fail.error_class, fail.message)
                res.final_url = url
                ex = None
            if ex is not None and ex.status in REDIRECT_STATUSES and not ex.error_class:
                location = ex.headers.get("location", "")
                if location:
                    chain.append(url)
                    step = next_hop(task, url, location, chain=chain, hops=hop, max_redirects=max_redirects,
                                    gate=self.redirect_gate, in_scope=self.scope.allows if self.scope else None)  # fmt: skip
                    if step.follow:
                        url = step.follow
                        hop += 1
                        continue
                    res = self._from_exchange(task, ctx, url, ex)
                    if step.stop_at:  # the redirect is the outcome: final_url names the target, no request
                        res.final_url = step.stop_at
                    else:
                        res.error_class, res.error_message = step.error_class, step.error_message
                        res.final_url = step.target or res.final_url
            if res is None:
                assert ex is not None
                res = self._from_exchange(task, ctx, url, ex)
            res.redirects = chain
            res.robots, res.sent = notes, made
            res.timings.dns_s = dns_s
            res.timings.total_s = self.clock() - t0
            return res

    def _from_exchange(self, task: UrlTask, ctx: BatchCtx, url: str, ex: Exchange) -> FetchResult:
        body = ex.body
        if not self._keep_all and ex.content_type not in self._parse_types:
            body = b""
        retry_after = None
        if ex.error_class == THROTTLED:
            retry_after = self.pacer.wait_for(host_of(url))
        noindex = nofollow = False
        tag = ex.headers.get("x-robots-tag")
        if tag:  # HTTP-level directives; meta robots in the HTML are links.py's
            noindex, nofollow = x_robots_tag(tag, self.robots.agent)
        return FetchResult(
            task.url, task.url_id, task.depth, final_url=url, status=ex.status, headers=ex.headers,
            content_type=ex.content_type, body=body, truncated=ex.truncated, wire_bytes=ex.wire_bytes,
            body_bytes=len(ex.body), timings=Timings(0.0, ex.connect_s, ex.ttfb_s, 0.0), ip=ex.ip,
            error_class=ex.error_class, error_message=ex.error_message, serial=ctx.batch.serial,
            fetcher_id=self.fetcher_id, fetched_at=time.time(), retry_after_s=retry_after,
            noindex=noindex, nofollow=nofollow, redirect_hops=task.redirect_hops, link_meta=task.link_meta,
        )  # fmt: skip

    async def ip_of(self, host: str, ctx: BatchCtx | None) -> str:
        """The SSRF-checked address for ``host`` (``name[:port]`` or an IP literal); raises Fail."""
        if ctx is not None:
            failed = ctx.failed_hosts.get(host)
            if failed is not None:
                raise failed
        cached = self._ips.get(host)
        if cached is not None and cached[1] > self.clock():
            if ctx is not None:
                ctx.host_ips[host] = cached[0]
            return cached[0]
        name, port = split_host(host)
        try:
            if is_ip_literal(name):
                reason = self.resolver.check(name)
                if reason:
                    raise SsrfBlocked(name, name, reason)
                ip = name
            else:
                answers = await self.resolver.resolve(name, port, socket.AF_UNSPEC)
                ip = answers[0]["host"]
        except Exception as exc:
            fail = Fail(dns_error_class(exc), str(exc)[:300] or type(exc).__name__)
            if fail.error_class in DNS_TRANSIENT:
                self.pacer.defer(host, DNS_RETRY_S)  # an outage: retry the host later, do not fail its URLs
            if ctx is not None:
                ctx.failed_hosts[host] = fail
            raise fail from exc
        if len(self._ips) > 100_000:
            self._ips.clear()
        self._ips[host] = (ip, self.clock() + _IP_TTL_S)
        if ctx is not None:
            ctx.host_ips[host] = ip
        return ip

    async def exchange(
        self, url: str, host: str, ip: str, max_body: int, *, fence: Callable[[], bool] | None = None,
        sent: list[tuple[float, int]] | None = None,
    ) -> Exchange:
        """A paced exchange with its retries (``fetchers.retrying``); ``sent`` gets (wall time started,
        status) of each request made."""  # fmt: skip
        f = self.settings.fetch
        return await paced_exchange(self.transport, self.pacer, url, host, ip, max_body, retries=f.retries,
                                    backoff_s=f.retry_backoff_s, archive=self.archive, fence=fence, sent=sent)  # fmt: skip

    async def _fetch_robots(self, origin: str) -> tuple[int, bytes, float]:
        """GET robots.txt for ``origin`` through the same transport, guard and pacer; follows up to 5
        redirects (RFC 9309). Returns (0, b'') when there is no HTTP answer; raises ``OriginFailed`` for a
        certificate failure (fetchers.tls), which every URL of the origin would meet."""
        url = robots_url(origin)
        made: list[tuple[float, int]] = []
        for _ in range(MAX_ROBOTS_REDIRECTS + 1):
            host = host_of(url)
            try:
                ip = await self.ip_of(host, None)
            except Fail:
                return 0, b"", time.time()
            ex = await self.exchange(url, host, ip, MAX_ROBOTS_BYTES, sent=made)
            at = made[0][0] if made else time.time()
            if ex.error_class in CERT_ERRORS and url == robots_url(origin):
                raise OriginFailed(ex.error_class, ex.error_message)
            if ex.error_class:
                return 0, b"", at
            if ex.status in REDIRECT_STATUSES:
                nxt = normalize(join(url, ex.headers.get("location", "")))
                if nxt is None:
                    return ex.status, b"", at
                url = nxt
                continue
            return ex.status, ex.body, at
        return 310, b"", made[0][0] if made else time.time()  # too many redirects: allow all (RFC 9309)


def _workers_for(n_urls: int, per_host: int, host: str) -> int:
    """Parallel workers (connections) for one host's URLs in a batch: up to per-host concurrency, but a new
    connection only for every URLS_PER_CONNECTION URLs. Opening 8 connections to fetch 10 pages costs the
    fetcher 8 handshakes and the site 8 sockets; 2 connections reused serially carry the same pages."""
    if not host:
        return 1
    return max(1, min(per_host, -(-n_urls // URLS_PER_CONNECTION)))
