"""Frontier: leases, politeness clocks, per-IP caps, and the spill/refill window (issue #11)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.frontier.frontier import Frontier
from pipeline.frontier.hoststate import HostState
from pipeline.frontier.limits import FrontierLimits
from pipeline.storage.base import UrlRecord
from pipeline.urls import fingerprint, host_of


def rec(url: str, depth: int = 0) -> UrlRecord:
    return UrlRecord(url, fingerprint(url), host_of(url), depth)


def host(f: Frontier, name: str) -> HostState:
    state = f.host(name)
    assert state is not None, name
    return state


def urls(host: str, n: int) -> list[UrlRecord]:
    return [rec(f"http://{host}/p/{i}") for i in range(n)]


def test_lease_groups_by_host_and_leases_each_host_once() -> None:
    f = Frontier(FrontierLimits(max_urls_per_host_batch=3))
    f.add(urls("a.test", 5) + urls("b.test", 5))
    first = f.lease("f1", 10, now=0.0)
    assert {host_of(t.url) for t in first} == {"a.test", "b.test"}
    assert len(first) == 6
    # both hosts are leased to f1: f2 gets nothing even though URLs remain
    assert f.lease("f2", 10, now=0.0) == []
    assert f.pending == 4 and f.leased == 6


def test_release_applies_host_delay() -> None:
    f = Frontier()
    f.add(urls("a.test", 4))
    f.lease("f1", 1, now=0.0)
    f.release("f1", 10.0, host_delays={"a.test": 5.0})
    assert f.lease("f1", 1, now=12.0) == []
    assert f.next_ready_at() == 15.0
    assert len(f.lease("f1", 1, now=15.0)) == 1


def test_requeue_returns_unfinished_urls() -> None:
    f = Frontier()
    f.add(urls("a.test", 3))
    got = f.lease("f1", 3, now=0.0)
    f.requeue("f1", got[1:])
    f.release("f1", 0.0)
    again = f.lease("f2", 10, now=0.0)
    assert [t.url for t in again] == [t.url for t in got[1:]]


def test_per_ip_cap_limits_hosts_leased_at_once() -> None:
    f = Frontier(FrontierLimits(hosts_per_ip=2, max_urls_per_host_batch=1))
    for h in ("a.test", "b.test", "c.test"):
        f.add(urls(h, 3))
    f.note_ips({"a.test": "127.0.10.1", "b.test": "127.0.10.1", "c.test": "127.0.10.1"})
    got = f.lease("f1", 100, now=0.0)
    assert len({host_of(t.url) for t in got}) == 2
    f.release("f1", 0.0)
    assert len({host_of(t.url) for t in f.lease("f1", 100, now=0.0)}) == 2


def test_window_spills_and_refills_from_store() -> None:
    f = Frontier(FrontierLimits(window_per_host=4, max_urls_per_host_batch=100))
    all_urls = urls("a.test", 10)
    f.add(all_urls)
    assert f.in_ram() == 4 and f.pending == 10
    got = f.lease("f1", 100, now=0.0)
    assert len(got) == 4
    f.release("f1", 0.0)
    assert f.wants_refill() == ["a.test"]
    # the store answers with what is still pending, shallowest first
    f.refill("a.test", all_urls[4:9])
    assert f.in_ram() == 4 and host(f, "a.test").complete is False
    assert len(f.lease("f1", 100, now=0.0)) == 4
    f.release("f1", 0.0)
    f.refill("a.test", all_urls[8:])
    assert host(f, "a.test").complete is True
    assert len(f.lease("f1", 100, now=0.0)) == 2
    f.release("f1", 0.0)
    assert f.pending == 0 and f.wants_refill() == []


def test_adds_during_a_lease_spill_instead_of_racing_the_refill() -> None:
    f = Frontier()
    f.add(urls("a.test", 2))
    f.lease("f1", 10, now=0.0)
    f.add([rec("http://a.test/new")])
    assert f.in_ram() == 0 and f.pending == 1
    f.release("f1", 0.0)
    assert f.wants_refill() == ["a.test"]


def test_max_pages_per_host() -> None:
    f = Frontier(FrontierLimits(max_pages_per_host=3))
    f.add(urls("a.test", 10))
    assert len(f.lease("f1", 100, now=0.0)) == 3
    f.release("f1", 0.0)
    assert f.lease("f1", 100, now=0.0) == []
    f.add([rec("http://a.test/late")])
    assert f.pending == 0


def test_urls_given_back_do_not_count_against_the_host_cap() -> None:
    """A batch that comes back unfinished (a dead fetch process or node, an expired lease, a 503 with
    Retry-After) gives its URLs back: they are fetched later within the cap, not lost to it. Before,
    each return counted as a page, so a host ended short of its cap with URLs left PENDING."""
    f = Frontier(FrontierLimits(max_pages_per_host=3))
    f.add(urls("a.test", 10))
    first = f.lease("f1", 100, now=0.0)
    assert len(first) == 3
    f.requeue("f1", first[1:])  # one page done, two back
    f.release("f1", 0.0)
    again = f.lease("f1", 100, now=0.0)
    assert [t.url for t in again] == [t.url for t in first[1:]]
    f.release("f1", 0.0)
    assert f.lease("f1", 100, now=0.0) == []  # three pages in all


def test_pages_taken_before_a_restart_count_against_the_host_cap() -> None:
    """A resumed crawl (or a restarted dispatcher) is told how many URLs each host took before
    (``Store.taken_per_host``): a host at its cap is not restored, one below it takes only the rest, and a
    host with nothing pending now gets its count when its next link arrives. Before, the count started
    at 0 in every process, so each resume could fetch a whole cap's worth of pages per host again."""
    f = Frontier(FrontierLimits(max_pages_per_host=3))
    f.charge_taken({"a.test": 3, "b.test": 1, "c.test": 2})
    f.restore("a.test", 5)
    f.restore("b.test", 5)
    assert f.pending == 5 and f.capped("a.test") and not f.capped("b.test")
    f.refill("b.test", urls("b.test", 5))
    assert len(f.lease("f1", 100, now=0.0)) == 2  # b: 1 before + 2 now
    f.release("f1", 0.0)
    assert f.lease("f1", 100, now=0.0) == []
    f.add(urls("c.test", 4))  # c had nothing pending at the restart
    assert len(f.lease("f2", 100, now=0.0)) == 1
    uncapped = Frontier(FrontierLimits())
    uncapped.charge_taken({"a.test": 3})  # no cap: nothing to remember
    uncapped.add(urls("a.test", 4))
    assert len(uncapped.lease("f1", 100, now=0.0)) == 4


def _model(spec: list[tuple[int, int]], active: int = 0) -> tuple[Frontier, dict[str, UrlRecord]]:
    """A small-window frontier and the store it mirrors (url -> record), from (host, page) pairs. With
    active hosts, a host yields its place after 4 URLs (the session budget) when others wait."""
    f = Frontier(
        FrontierLimits(window_per_host=3, max_urls_per_host_batch=2, active_hosts=active, session_urls=4 if active else 0)
    )
    store: dict[str, UrlRecord] = {}
    for host_n, page in spec:
        r = rec(f"http://h{host_n}.test/p/{page}")
        if r.url not in store:
            store[r.url] = r
            f.add([r])
    return f, store


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 30)), min_size=1, max_size=60), st.integers(0, 3))
def test_every_url_is_leased_exactly_once(spec: list[tuple[int, int]], active: int) -> None:
    """Model check against a store: whatever the interleaving (and however few hosts are active at
    once), each URL comes out once."""
    f, store = _model(spec, active)
    seen: list[str] = []
    now = 0.0
    for _ in range(1000):
        for host in f.wants_refill():
            pend = sorted((r for r in store.values() if r.host == host), key=lambda r: (r.depth, r.url))
            f.refill(host, pend[:4])
        got = f.lease("f", 5, now)
        for t in got:
            store.pop(t.url)  # the result is recorded before release
        seen += [t.url for t in got]
        f.release("f", now)
        if not store and not f.wants_refill():
            break
        now += 1.0
    assert sorted(seen) == sorted(set(seen))
    assert not store


def test_host_queue_is_compact_and_round_trips() -> None:
    from pipeline.frontier.hostqueue import HostQueue

    q = HostQueue("a.test:8080")
    urls_in = [f"http://a.test:8080/p/{i}?x={i}" for i in range(10_000)] + ["https://a.test:8080/s"]
    for i, u in enumerate(urls_in):
        q.append(u, i, i % 40)
    assert q.nbytes() / len(q) < 32  # vs ~150 bytes for a str + task object
    out = [q.popleft() for _ in range(len(q))]
    assert [t.url for t in out] == urls_in
    assert [t.depth for t in out[:41]] == [i % 40 for i in range(41)]
    assert len(q) == 0 and not q


def test_refill_skips_done_ids_but_judges_completeness_on_every_row() -> None:
    """A write-behind store still shows finished URLs PENDING: skip them, but a full read (window + 1
    rows) still means more URLs wait in the store."""
    f = Frontier(FrontierLimits(window_per_host=4, max_urls_per_host_batch=100))
    all_urls = urls("a.test", 10)
    f.add(all_urls)
    got = f.lease("f1", 100, now=0.0)
    f.release("f1", 0.0)
    stale = {t.url_id for t in got}
    f.refill("a.test", all_urls[:5], done=stale)  # 4 stale rows + 1 real: not complete
    assert host(f, "a.test").complete is False and f.in_ram() == 1
    assert [t.url for t in f.lease("f1", 100, now=0.0)] == [all_urls[4].url]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 25)), min_size=1, max_size=60),
    st.integers(0, 3),
    st.integers(0, 2),
)
def test_every_url_is_leased_once_with_a_lagging_store(spec: list[tuple[int, int]], lag: int, active: int) -> None:
    """Model check of write-behind: outcomes reach the store ``lag`` rounds late, refills pass the
    unapplied ids as ``done``; each URL still comes out exactly once and none is left behind."""
    f, store = _model(spec, active)
    total = len(store)
    queued: list[list[UrlRecord]] = []  # outcomes on the writer's queue, oldest first
    seen: list[str] = []
    for _ in range(1000):
        done = {r.url_id for job in queued for r in job}
        for host in f.wants_refill():
            pend = sorted((r for r in store.values() if r.host == host), key=lambda r: (r.depth, r.url))
            f.refill(host, pend[:4], done=done)
        got = f.lease("f", 5, 0.0)
        queued.append([store[t.url] for t in got])
        while len(queued) > lag:
            for r in queued.pop(0):
                store.pop(r.url)  # applied by the writer
        seen += [t.url for t in got]
        f.release("f", 0.0)
        if f.pending == 0 and not f.wants_refill(1) and not queued:
            break
        if not got and queued:
            for r in queued.pop(0):
                store.pop(r.url)
    assert len(seen) == len(set(seen)) == total


def test_release_host_ends_one_lease_of_a_batch_early() -> None:
    f = Frontier(FrontierLimits(max_urls_per_host_batch=2, hosts_per_ip=1))
    f.add(urls("a.test", 4) + urls("b.test", 4))
    f.note_ips({"a.test": "10.0.0.1", "b.test": "10.0.0.2"})
    assert len(f.lease("f1", 4, now=0.0)) == 4
    assert f.release_host("f2", "a.test", 0.0) is False  # not f2's lease
    assert f.release_host("f1", "a.test", 1.0, delay_s=2.0, ip="10.0.0.1") is True
    assert f.release_host("f1", "a.test", 1.0) is False  # already released
    assert host(f, "a.test").leased_to == "" and host(f, "b.test").leased_to == "f1"
    assert f.lease("f2", 4, now=2.9) == []  # its delay holds
    got = f.lease("f2", 4, now=3.0)  # its IP's lease count was returned too
    assert {host_of(t.url) for t in got} == {"a.test"}
    f.release("f1", 3.0)  # the batch ends: only b.test was still f1's
    assert host(f, "a.test").leased_to == "f2" and host(f, "b.test").leased_to == ""
    assert f.leased == 2


def _drain(f: Frontier, store: dict[str, UrlRecord], now: float, n: int = 100) -> list[str]:
    for host in f.wants_refill():
        f.refill(host, sorted((r for r in store.values() if r.host == host), key=lambda r: r.url)[:5])
    got = f.lease("f", n, now)
    for t in got:
        store.pop(t.url)
    f.release("f", now)
    return [t.url for t in got]


def test_active_hosts_work_few_hosts_at_once_and_keep_the_rest_in_the_store() -> None:
    f = Frontier(FrontierLimits(window_per_host=4, max_urls_per_host_batch=100, active_hosts=2))
    store = {r.url: r for h in ("a", "b", "c", "d") for r in urls(f"{h}.test", 3)}
    f.add(list(store.values()))
    assert f.active == 2 and f.in_ram() == 6 and f.pending == 12  # c and d wait, their URLs in the store
    first = _drain(f, store, 0.0)
    assert {host_of(u) for u in first} == {"a.test", "b.test"}
    # a and b drained: c and d took their places; their windows come from the store
    assert f.active == 2 and sorted(f.wants_refill()) == ["c.test", "d.test"]
    second = _drain(f, store, 1.0)
    assert {host_of(u) for u in second} == {"c.test", "d.test"} and not store and f.pending == 0
    assert f.active == 0


def test_a_host_is_activated_when_no_active_host_is_ready() -> None:
    """Politeness must not starve the fetchers: with the one active host waiting out its delay, the
    next lease activates another host."""
    f = Frontier(FrontierLimits(window_per_host=4, max_urls_per_host_batch=100, active_hosts=1))
    store = {r.url: r for h in ("a", "b") for r in urls(f"{h}.test", 6)}
    f.add(list(store.values()))
    got = f.lease("f", 2, 0.0)
    f.release("f", 0.0, host_delays={"a.test": 10.0})
    assert {host_of(t.url) for t in got} == {"a.test"} and f.active == 1
    assert f.lease("f", 2, 1.0) == [] and f.active == 2  # a is not ready: b is activated
    for host in f.wants_refill():
        f.refill(host, [r for r in store.values() if r.host == host])
    assert {host_of(t.url) for t in f.lease("f", 2, 1.0)} == {"b.test"}


def test_a_waiting_host_gets_requeued_urls_in_the_store_only() -> None:
    f = Frontier(FrontierLimits(window_per_host=4, max_urls_per_host_batch=100, active_hosts=1))
    f.add(urls("a.test", 2))
    got = f.lease("f", 100, 0.0)
    f.add(urls("b.test", 2))  # waits: a is still active (leased)
    assert f.active == 1 and host(f, "b.test").complete is False and f.in_ram() == 0
    f.requeue("f", got)  # a's URLs come back into a's window
    f.release("f", 0.0)
    assert f.in_ram() == 2 and f.pending == 4


def test_a_deep_host_yields_its_place_after_its_session_budget() -> None:
    f = Frontier(FrontierLimits(window_per_host=4, max_urls_per_host_batch=2, active_hosts=1, session_urls=4))
    store = {r.url: r for r in urls("deep.test", 10) + urls("small.test", 2)}
    f.add(list(store.values()))
    order = []
    for now in range(10):
        got = _drain(f, store, float(now), n=2)
        order.append(sorted({host_of(u) for u in got}))
    assert order[:4] == [["deep.test"], ["deep.test"], ["small.test"], ["deep.test"]]
    assert not store and f.pending == 0 and f.active == 0



@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["add", "lease", "release", "requeue"]), st.integers(0, 5), st.integers(0, 40)),
        min_size=1,
        max_size=80,
    ),
    st.integers(0, 3),
    st.integers(0, 5),
)
def test_active_hosts_never_lose_or_repeat_a_url_under_interleaved_adds_and_requeues(
    ops: list[tuple[str, int, int]], active: int, budget: int
) -> None:
    """Model check with discoveries arriving mid-crawl and unfinished URLs handed back: a URL is never
    leased after its result was recorded, and every URL is eventually done."""
    f = Frontier(FrontierLimits(window_per_host=3, max_urls_per_host_batch=2, active_hosts=active, session_urls=budget))
    pending: dict[str, UrlRecord] = {}  # the store's PENDING rows
    done: set[str] = set()
    held: list = []  # leased, not yet answered

    def refill() -> None:
        for host in f.wants_refill():
            f.refill(host, sorted((r for r in pending.values() if r.host == host), key=lambda r: r.url)[:4])

    def settle(now: float, *, requeue: bool) -> None:
        back = held[::2] if requeue else []
        for t in held:
            if t not in back:
                pending.pop(t.url)
                done.add(t.url)
        if back:
            f.requeue("f", back)
        held.clear()
        f.release("f", now)

    now = 0.0
    for op, host_n, page in ops:
        now += 1.0
        if op == "add":
            r = rec(f"http://h{host_n}.test/p/{page}")
            if r.url not in pending and r.url not in done:
                pending[r.url] = r
                f.add([r])
        elif op == "lease" and not held:
            refill()
            held.extend(f.lease("f", 3, now))
            assert not {t.url for t in held} & done
        elif held:
            settle(now, requeue=op == "requeue")
    for _ in range(2000):  # drain
        if not pending:
            break
        now += 1.0
        refill()
        held.extend(f.lease("f", 3, now))
        assert not {t.url for t in held} & done
        settle(now, requeue=False)
    assert not pending and f.pending == 0
