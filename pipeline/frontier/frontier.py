"""The frontier: Mercator-style per-host queues with politeness clocks and host leases. Pure.

Design for scale (issue #11): the store's pending set is the queue; the frontier keeps only a
bounded *window* of each host's shallowest pending URLs in RAM and refills it from the store when
it runs dry. RAM therefore grows with the number of hosts (a small HostState each) and the window
size, never with the number of discovered URLs.

A host is leased to one fetcher at a time, so per-host limits hold fleet-wide; a host's IP, once a
fetcher has reported it, caps how many of that IP's hosts may be leased at once (per-IP limits). The
leases: ``pipeline.frontier.leases``; the order hosts are leased in, by their politeness clocks:
``pipeline.frontier.readyheap``.

Only *active* hosts hold a window and take part in leasing (``pipeline.frontier.activehosts``); the others
wait with their URLs in the store only.

Refill contract, which keeps the window consistent with the store without per-URL state writes:
a window is only refilled while its host is *not* leased and after every result of its last lease
has been written to the store. The store's PENDING rows are then exactly the URLs not yet done.
The frontier never performs I/O; ``wants_refill`` names the hosts and the caller feeds ``refill``.

Host cap (``limits.max_pages_per_host``): counts the distinct pages a host gives; a re-fetch of a due URL
(marked from its re-crawl state) or a robots.txt or sitemap file (``UrlRecord.infra``) is never charged
(``UrlTask.uncharged``). A capped host's new pages stay PENDING in the store, never leased. Without
re-crawling the crawl is then done with the host; with it (``limits.recrawl``) the host keeps re-fetching
what it took: its refills read only its due URLs and its sitemap files (``refetches_only``), and those
reads correct its pending count, which until then may still count pages the frontier will never lease.

Priority: a refill loads a host's URLs in ``limits.refill_order`` (in-links first, then depth) when
``FrontierLimits.priority`` is set; limits.py says how that composes with the politeness clock and the
re-crawl budget. ``AnsweredFilter`` (answered.py) is the frontier as a crawl's dispatcher sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence

from fetchers.records import UrlTask
from pipeline.frontier.activehosts import ActiveHosts
from pipeline.frontier.hostcap import HostCap
from pipeline.frontier.hoststate import HostState
from pipeline.frontier.leases import LeaseBook
from pipeline.frontier.limits import DEFAULT_LIMITS, FrontierLimits, refill_order
from pipeline.frontier.readyheap import ReadyHeap
from pipeline.storage.base import UrlRecord
from pipeline.urls import host_of

Admit = Callable[[str, int], bool]


class Frontier:
    """Per-host queues with next-allowed times and leases (satisfies dispatch's FrontierLike)."""

    def __init__(self, limits: FrontierLimits = DEFAULT_LIMITS, *, admit: Admit | None = None) -> None:
        self.limits = limits
        # With dispatcher shards: asked before a host new to this frontier joins it (``admit(host, urls)``);
        # False leaves the host to the shard that owns it (its URLs are PENDING in the store whoever does).
        self.admit = admit
        self._hosts: dict[str, HostState] = {}
        self._ready = ReadyHeap()
        self._leases = LeaseBook(limits.hosts_per_ip)
        self._pending_total = 0
        self.cap = HostCap(limits.max_pages_per_host)
        self.at_work = ActiveHosts(
            floor=limits.active_hosts,
            session_urls=limits.session_urls,
            urls_per_host=limits.max_urls_per_host_batch,
            push=self._ready.push,
        )

    # --- feeding -----------------------------------------------------------------------------------
    def add(self, records: Iterable[UrlRecord | UrlTask]) -> None:
        """Register newly discovered PENDING URLs (already written to the store)."""
        for rec in records:
            host = rec.host if isinstance(rec, UrlRecord) else host_of(rec.url)
            hs = self._state(host, 1)
            if hs is None:
                continue  # another shard's host
            free = rec.infra if isinstance(rec, UrlRecord) else rec.uncharged
            if not free and self.cap.full(hs.issued):
                continue  # host capped: the URL stays PENDING in the store, never leased
            hs.pending += 1
            hs.epoch += 1
            self._pending_total += 1
            if not hs.active:
                self.at_work.enlist(hs)
            if hs.complete:
                if hs.active and not hs.leased_to and len(hs.window) < self.limits.window_per_host:
                    hs.window.push(rec, uncharged=free)
                else:
                    # Spill: the URL lives only in the store from now on. While leased, appending could
                    # race a refill; marking incomplete is always safe (refill reads the store).
                    hs.complete = False
            self._ready.push(hs)

    def add_pending(self, host: str, count: int, *, refetch: bool = False) -> None:
        """``count`` PENDING URLs of ``host`` are in the store, written by someone else (the fleet's link
        jobs; with ``refetch``, the re-crawl's due URLs); none is in RAM. The host's window is marked
        incomplete, so it refills from the store."""
        if count <= 0:
            return
        hs = self._state(host, count)
        if hs is None:
            return  # another shard's host
        if not refetch and self.cap.full(hs.issued):
            return  # host capped: new URLs stay PENDING in the store, never leased
        hs.pending += count
        hs.epoch += 1
        self._pending_total += count
        hs.complete = False
        if not hs.active:
            self.at_work.enlist(hs)
        self._ready.push(hs)

    def capped(self, host: str) -> bool:
        """True when ``host`` has given ``max_pages_per_host`` pages: its new ones stay PENDING in the store."""
        return self.cap.capped(host, self._hosts.get(host))

    def refetches_only(self, host: str) -> bool:
        """True when a refill of ``host`` must read only URLs due again and its robots.txt and sitemap files
        (``Store.pending(refetches_only=True)``): it is capped and the crawl re-crawls."""
        return self.limits.recrawl and self.capped(host)

    def capped_hosts(self) -> int:
        """Hosts that gave ``max_pages_per_host`` pages, in this run or (hosts not met yet) in earlier ones."""
        return self.cap.capped_hosts(self._hosts.values())

    def charge_taken(self, taken: Mapping[str, int]) -> None:
        """Pages each host gave in earlier runs of the crawl (``Store.taken_per_host``, on resume): they count
        as this run's leases do, so the cap is a total over the crawl's runs (``HostCap.charge``)."""
        self.cap.charge(taken, self._hosts)

    def restore(self, host: str, pending: int) -> bool:
        """Rebuild a host from the store after a restart: ``pending`` URLs, none in RAM yet. False, and
        nothing restored, for a capped host of a crawl that does not re-crawl (as ``add`` and
        ``add_pending`` skip it); a capped host of one that does is restored with ``pending`` as an upper
        bound, which its first (re-fetches only) refill corrects."""
        if self.capped(host) and not self.limits.recrawl:
            return False
        hs = self._state(host, pending)
        if hs is None:
            return False  # another shard's host
        self._pending_total += pending - hs.pending
        hs.pending = pending
        hs.epoch += 1
        hs.window.clear()
        hs.complete = pending == 0
        if pending and not hs.active:
            self.at_work.enlist(hs)
        self._ready.push(hs)
        return True

    def wants_refill(self, limit: int = 64, *, skip: Container[str] = frozenset()) -> list[str]:
        """Active hosts whose window is empty but which still have pending URLs in the store (not those
        in ``skip``: reads already asked for). Cheapest tests first: this runs at each dispatch attempt."""
        out = []
        for hs in self.at_work:
            if (
                hs.pending > 0
                and not hs.complete
                and not hs.leased_to
                and hs.host not in skip
                and not hs.window
            ):
                out.append(hs.host)
                if len(out) >= limit:
                    break
        return out

    def refill(self, host: str, records: Sequence[UrlRecord], *, done: Container[int] = frozenset(),
               epoch: int | None = None) -> None:  # fmt: skip
        """Load the host's shallowest pending URLs (``store.pending(host, window_per_host + 1)``).

        ``done``: URL ids the store may still show PENDING although their outcome is on its way to it
        (a write-behind queue); they are skipped, but still count when deciding whether ``records``
        held every pending URL of the host.
        ``epoch``: the host's ``HostState.epoch`` when the read was asked for (``pipeline.crawl.refills``).
        If URLs joined the host since, the read may miss them: its URLs load, the window stays incomplete.
        """
        hs = self._hosts.get(host)
        if hs is None or hs.leased_to or hs.window or not hs.active:
            return  # the contract says refill only idle, empty, active hosts (still ours); ignore a stale call
        usable = [r for r in records if r.url_id not in done] if done else records
        keep = usable[: self.limits.window_per_host]
        if self.limits.priority:  # stable: equal scores keep the store's (depth, URL) order
            keep = sorted(keep, key=refill_order)
        for r in keep:
            free = r.revisit is not None or r.infra
            hs.window.push(r, uncharged=free)
        hs.complete = len(records) <= self.limits.window_per_host and (epoch is None or epoch == hs.epoch)
        # The store is the truth: fix a drifted count (e.g. URLs finished by a replayed journal).
        if hs.complete:
            self._pending_total += len(keep) - hs.pending
            hs.pending = len(keep)
        self._ready.push(hs)
        self.at_work.settle(hs)

    # --- leasing (FrontierLike) --------------------------------------------------------------------
    def lease(self, fetcher_id: str, n: int, now: float) -> list[UrlTask]:
        """Up to ``n`` URLs from hosts that are ready now, grouped by host; those hosts become leased."""
        tasks: list[UrlTask] = []
        skipped: list[HostState] = []
        while len(tasks) < n:
            hs = self._ready.pop(now, self._hosts)
            if hs is None:
                self.at_work.activate_more(n - len(tasks))  # windows come with the next refill
                break
            if hs.leased_to or not hs.window:
                continue  # re-pushed on release / refill
            if self._leases.ip_full(hs):
                skipped.append(hs)
                continue
            take = min(n - len(tasks), self.limits.max_urls_per_host_batch, len(hs.window))
            if self.cap.full(hs.issued) and not hs.window.head_uncharged():
                self._cap_reached(hs)
                continue
            for got in range(take):
                if self.cap.full(hs.issued) and not hs.window.head_uncharged():
                    take = got  # the rest waits for the next lease, which finds the host capped
                    break
                t = hs.window.popleft()
                tasks.append(t)
                if not t.uncharged:
                    hs.issued += 1
            hs.pending -= take
            hs.session += take
            self._pending_total -= take
            self._leases.start(fetcher_id, hs, take)
        for hs in skipped:
            self._ready.push(hs)
        return tasks

    def release(
        self,
        fetcher_id: str,
        now: float,
        *,
        host_delays: Mapping[str, float] | None = None,
        host_ips: Mapping[str, str] | None = None,
    ) -> None:
        """End every lease of ``fetcher_id``; each host may be contacted again after its delay."""
        delays = host_delays or {}
        ips = host_ips or {}
        for host in self._leases.take_all(fetcher_id):
            self._end_lease(self._hosts[host], now + delays.get(host, 0.0), ips.get(host, ""))

    def release_host(
        self, fetcher_id: str, host: str, now: float, *, delay_s: float = 0.0, ip: str = ""
    ) -> bool:
        """End ``fetcher_id``'s lease of one host before its batch ends (every URL of the host in that
        batch has a final result). False, and nothing changes, when the host is not leased to it."""
        if not self._leases.take(fetcher_id, host):
            return False
        self._end_lease(self._hosts[host], now + delay_s, ip)
        return True

    def _end_lease(self, hs: HostState, not_before: float, ip: str) -> None:
        self._leases.end(hs, ip)
        hs.next_allowed = max(hs.next_allowed, not_before)
        if hs.pending == 0 and not hs.window and hs.complete:
            self.at_work.settle(hs)  # drained: leave it out of the heap (re-added by add())
            return
        if not self.at_work.yields_place(hs):
            self._ready.push(hs)

    def requeue(self, fetcher_id: str, tasks: Sequence[UrlTask]) -> None:
        """Give back URLs a fetcher did not finish (still PENDING in the store). They no longer count as
        issued: the host's page cap counts pages, not attempts."""
        for t in reversed(tasks):  # appendleft in reverse keeps the original order
            hs = self._hosts[host_of(t.url)]  # leased here: still here (``forget`` leaves a leased host)
            if not t.uncharged:
                hs.issued = max(0, hs.issued - 1)
            hs.pending += 1
            hs.epoch += 1
            self._pending_total += 1
            if not hs.active:
                self.at_work.enlist(hs)
            if hs.complete and hs.active:
                hs.window.appendleft(t)
            else:
                hs.complete = False  # waiting hosts keep their URLs in the store only
            self._ready.push(hs)

    def forget(self, host: str) -> HostState | None:
        """Drop an idle host and everything the frontier holds of it (its URLs stay PENDING in the store):
        it moves to another dispatcher shard (``pipeline.frontier.handoff``). Its state as it was, or None
        when it is unknown or leased (a leased host stays: its lease ends here)."""
        hs = self._hosts.get(host)
        if hs is None or hs.leased_to:
            return None
        del self._hosts[host]
        self._pending_total -= hs.pending
        self.at_work.drop(hs)  # a heap entry left behind is stale: ``lease`` finds no such host
        return hs

    def hold(self, host: str, not_before: float) -> None:
        """Lease ``host`` no earlier than ``not_before`` (a politeness clock that came with it from another
        shard). A host in the ready heap enters it again at its new time: its old entry no longer matches its
        clock, and would be dropped at the top while the host still counted as in the heap."""
        hs = self._hosts.get(host)
        if hs is None or not_before <= hs.next_allowed:
            return
        hs.next_allowed = not_before
        if hs.in_heap:
            hs.in_heap = False
            self._ready.push(hs)

    def note_ips(self, host_ips: Mapping[str, str]) -> None:
        """Record the address a fetcher resolved for each host (enables per-IP lease limits)."""
        for host, ip in host_ips.items():
            hs = self._hosts.get(host)
            if hs is not None:
                self._leases.note_ip(hs, ip)

    def available(self, now: float) -> int:
        return self._pending_total

    # --- views -------------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """URLs waiting (in RAM or spilled to the store), not counting those leased."""
        return self._pending_total

    @property
    def leased(self) -> int:
        return self._leases.urls

    @property
    def active(self) -> int:
        """Hosts active now (holding a window or about to be refilled)."""
        return len(self.at_work)

    def in_ram(self) -> int:
        return sum(len(hs.window) for hs in self._hosts.values())

    def states(self) -> Iterable[HostState]:
        """Every host's state (its memory: ``pipeline.frontier.footprint``)."""
        return self._hosts.values()

    def host(self, host: str) -> HostState | None:
        return self._hosts.get(host)

    def next_ready_at(self) -> float | None:
        """When the earliest waiting host becomes ready (for the caller's sleep), or None."""
        return self._ready.next_at(self._hosts)

    def __len__(self) -> int:
        return len(self._hosts)

    # --- internals ---------------------------------------------------------------------------------
    def _state(self, host: str, urls: int) -> HostState | None:
        """The host's state, made if new; None when ``admit`` refuses a new host (and its ``urls``)."""
        hs = self._hosts.get(host)
        if hs is None and (self.admit is None or self.admit(host, urls)):
            hs = self._hosts[host] = HostState(host)
            self.cap.met(hs)
        return hs

    def _cap_reached(self, hs: HostState) -> None:
        """``hs`` (not leased) has given max_pages_per_host URLs and the next in its window is new. Without
        re-crawling the crawl is done with it: forget its remaining URLs (they stay PENDING in the store).
        With it, drop the window: the next refill reads only the host's re-fetches and corrects its
        pending count (which still counts its new URLs until then)."""
        if not self.limits.recrawl:
            self._drop_host(hs)
        else:
            hs.window.clear()
            hs.complete = False

    def _drop_host(self, hs: HostState) -> None:
        """The crawl is done with ``hs``: forget its remaining URLs (they stay PENDING in the store)."""
        self._pending_total -= hs.pending
        hs.pending = 0
        hs.window.clear()
        hs.complete = True
        self.at_work.settle(hs)
