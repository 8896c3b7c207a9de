"""The Dispatcher composed over a MemoryFrontier, driven by an injected clock."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fetchers.records import Batch, UrlTask
from pipeline.dispatch.dispatcher import Dispatcher
from pipeline.dispatch.memfrontier import MemoryFrontier
from pipeline.dispatch.protocols import FrontierLike, Heartbeat, Refusal
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.serials import MemorySerialStore, SerialAllocator
from pipeline.settings import DispatchSettings

T0 = 1_700_000_040.0  # second 1 of a minute


@dataclass
class Clock:
    now: float = T0

    def __call__(self) -> float:
        return self.now


def tasks(n: int, hosts: int = 10, start: int = 0) -> list[UrlTask]:
    return [UrlTask(f"http://h{i % hosts}.test/p{i}", i, 0) for i in range(start, start + n)]


def make(
    quotas: Quotas | None = None,
    *,
    urls: int = 1000,
    store: MemorySerialStore | None = None,
    max_outstanding: int = 1,
    **kw,
) -> tuple[Dispatcher, MemoryFrontier, Clock]:
    clock = Clock()
    frontier = MemoryFrontier(per_host=1000)
    frontier.add(tasks(urls), now=clock.now)
    settings = DispatchSettings(**{"k": 10, "n_min": 2, "n_max": 100, "heartbeat_s": 2.0, **kw})
    store = store or MemorySerialStore()
    d = Dispatcher(settings, frontier=frontier, quotas=quotas or Quotas.unlimited(),
                   serials=SerialAllocator(store.reserve_serials, block=8), clock=clock,
                   max_outstanding=max_outstanding)  # fmt: skip
    return d, frontier, clock


def hb(fid: str, clock: Clock, *, rate: float = 100.0, free: int = 100) -> Heartbeat:
    return Heartbeat(fid, clock.now, 0, 0, rate, free)


def ok(result: Batch | Refusal) -> Batch:
    assert isinstance(result, Batch), result
    return result


def refused(result: Batch | Refusal, reason: str) -> Refusal:
    assert isinstance(result, Refusal) and result.reason == reason, result
    return result


def test_memory_frontier_satisfies_protocol() -> None:
    assert isinstance(MemoryFrontier(), FrontierLike)


def test_offer_gives_k_first_then_sized_by_speed() -> None:
    d, _, clock = make()
    d.register("fast")
    d.register("slow")
    a, b = ok(d.offer("fast", "default")), ok(d.offer("slow", "default"))
    assert len(a.tasks) == 10 and len(b.tasks) == 10  # n(0) = k
    assert a.serial < b.serial and a.fetcher_id == "fast" and a.issued_at == clock.now
    clock.now += 1
    assert d.complete(a.serial, fetcher_id="fast", pages=10, elapsed_s=1.0)  # 0.1 s/page
    assert d.complete(b.serial, fetcher_id="slow", pages=10, elapsed_s=3.0)  # 0.3 s/page
    assert d.batch_size("fast") == 20 and d.batch_size("slow") == 7  # k*avg/t, avg = 0.2
    snap = d.snapshot()
    assert snap.fetchers["fast"].t == pytest.approx(0.1) and snap.fetchers["fast"].count == 1
    assert snap.avg_t == pytest.approx(0.2)


def test_offer_counts_r_and_n_and_reports_u() -> None:
    d, _, clock = make(Quotas({"x": 1000}))
    d.heartbeat(hb("a", clock, rate=10, free=50))
    d.heartbeat(hb("b", clock, rate=10, free=80))
    batch = ok(d.offer("b", "x"))
    assert batch.fetcher_id == "b" and len(batch.tasks) == 10 and batch.service == "x"
    snap = d.snapshot()
    assert snap.fetchers["b"].r == 10 and snap.services["x"].n == 10 and snap.fetchers["a"].r == 0
    assert snap.fetchers["b"].u == 10 * 1 + 80 - 10
    given = d.grants_this_minute()  # S1's r of every fetcher, as the fleet's node choice reads it
    assert dict(given) == {"b": 10} and d.request_size("b", "x") == 10
    ok(d.offer("a", "x"))
    assert dict(given) == {"b": 10, "a": 10}  # a view: later grants show
    clock.now = T0 + 60  # the next minute: every r back to 0
    assert dict(d.grants_this_minute()) == {} and dict(given) == {}


def test_unknown_service_and_quota_zero() -> None:
    d, _, clock = make(Quotas({"x": 10, "zero": 0}))
    d.heartbeat(hb("a", clock))
    refused(d.offer("a", "nope"), "unknown_service")
    refused(d.offer("a", "nope"), "unknown_service")
    clock.now = T0 + 59
    refused(d.offer("a", "zero"), "quota")
    refused(d.offer("a", "zero"), "quota")
    snap = d.snapshot()
    assert snap.refusals == {"unknown_service": 2, "quota": 2}
    assert snap.services["zero"].refusals == {"quota": 2} and "nope" not in snap.services


def test_batch_shrinks_to_quota_at_second_1_and_carries_to_60() -> None:
    d, _, clock = make(Quotas({"x": 4}), k=10)
    d.heartbeat(hb("a", clock, rate=1000, free=1000))
    first = ok(d.offer("a", "x"))
    assert len(first.tasks) == 4  # s = 1: n_i = 10 asks for one second's quota, 1*4
    d.complete(first.serial, fetcher_id="a", pages=4, elapsed_s=1.0)
    r = refused(d.offer("a", "x"), "quota")
    assert r.retry_after_s == pytest.approx(1.0)  # 8 fits at second 2
    clock.now = T0 + 59.5  # s = 60: budget 240 - 4, carried over
    d.heartbeat(hb("a", clock, rate=1000, free=1000))
    total = 4
    while isinstance(res := d.offer("a", "x"), Batch):
        total += len(res.tasks)
        d.complete(res.serial, fetcher_id="a", pages=len(res.tasks), elapsed_s=1.0)  # frees its hosts
    assert total == 240 and res.reason == "quota"
    assert res.retry_after_s == pytest.approx(0.5)  # until the minute rolls over
    clock.now = T0 + 60  # second 1 again: reset
    d.heartbeat(hb("a", clock, rate=1000, free=1000))
    assert len(ok(d.offer("a", "x")).tasks) == 4
    assert d.snapshot().services["x"].n == 4


def test_unknown_and_dead_fetchers() -> None:
    d, _, clock = make()
    refused(d.offer("a", "default"), "unknown_fetcher")
    d.heartbeat(hb("a", clock))
    d.heartbeat(hb("b", clock))
    clock.now += 4.0  # both silent for 2 periods
    refused(d.offer("a", "default"), "not_live")  # excluded even before tick
    d.tick()
    refused(d.offer("b", "default"), "not_live")
    assert all(not f.live for f in d.snapshot().fetchers.values())


def test_empty_frontier() -> None:
    d, _, clock = make(urls=0)
    d.register("a")
    refused(d.offer("a", "default"), "empty")
    d.heartbeat(hb("a", clock))
    refused(d.offer("a", "default"), "empty")
    refused(d.offer("ghost", "default"), "unknown_fetcher")


def test_lease_returns_fewer_than_asked() -> None:
    d, _, clock = make(urls=3, max_outstanding=2)
    d.register("a")
    batch = ok(d.offer("a", "default"))
    assert len(batch.tasks) == 3
    refused(d.offer("a", "default"), "empty")


def test_max_outstanding_busy() -> None:
    d, _, clock = make()
    d.heartbeat(hb("a", clock))
    batch = ok(d.offer("a", "default"))
    refused(d.offer("a", "default"), "busy")
    d.complete(batch.serial, fetcher_id="a", pages=10, elapsed_s=1.0)
    ok(d.offer("a", "default"))
    with pytest.raises(ValueError):
        make(max_outstanding=0)


def test_serial_replay_unknown_and_wrong_fetcher() -> None:
    d, _, clock = make()
    d.register("a")
    d.register("b")
    batch = ok(d.offer("a", "default"))
    assert not d.complete(batch.serial, fetcher_id="b", pages=10, elapsed_s=1.0)
    assert d.complete(batch.serial, fetcher_id="a", pages=10, elapsed_s=1.0)
    assert not d.complete(batch.serial, fetcher_id="a", pages=10, elapsed_s=1.0)  # replay
    assert not d.complete(999_999, fetcher_id="a", pages=1, elapsed_s=1.0)
    snap = d.snapshot()
    assert snap.dropped == {"wrong_fetcher": 1, "duplicate": 1, "unknown": 1}
    assert snap.duplicates_dropped == 3 and snap.fetchers["a"].count == 1 and snap.in_flight == 0


def test_death_requeues_without_loss_or_duplicates_and_expires_serials() -> None:
    d, frontier, clock = make(urls=50, max_outstanding=2)
    d.register("a")
    d.register("b")
    a1 = ok(d.offer("a", "default"))
    a2 = ok(d.offer("a", "default"))
    b1 = ok(d.offer("b", "default"))
    assert frontier.pending() == 20
    clock.now += 3.0
    d.heartbeat(hb("b", clock))
    clock.now += 1.0  # a silent for 4 s
    assert d.tick() == sorted([a1.serial, a2.serial])
    assert frontier.pending() == 40 and frontier.leased_hosts("a") == set()
    # a's late results are dropped: the URLs are pending again, so nothing is stored twice.
    assert not d.complete(a1.serial, fetcher_id="a", pages=10, elapsed_s=1.0)
    assert d.snapshot().dropped == {"expired": 1}
    # every URL is either pending once or in b's batch; none lost, none duplicated
    assert d.complete(b1.serial, fetcher_id="b", pages=10, elapsed_s=1.0)
    got: list[int] = [t.url_id for t in b1.tasks]
    while isinstance(res := d.offer("b", "default"), Batch):
        got += [t.url_id for t in res.tasks]
        assert d.complete(res.serial, fetcher_id="b", pages=len(res.tasks), elapsed_s=1.0)
    assert sorted(got) == list(range(50))
    snap = d.snapshot()
    assert snap.expired_total == 2 and snap.requeued_urls == 20 and snap.fetchers["a"].deaths == 1


def test_fetcher_returns_after_being_declared_dead() -> None:
    d, _, clock = make()
    d.heartbeat(hb("a", clock))
    old = ok(d.offer("a", "default"))
    clock.now += 5.0
    assert d.tick() == [old.serial]
    refused(d.offer("a", "default"), "not_live")
    assert not d.complete(old.serial, fetcher_id="a", pages=10, elapsed_s=5.0)  # does not revive
    refused(d.offer("a", "default"), "not_live")
    d.heartbeat(hb("a", clock))  # back
    new = ok(d.offer("a", "default"))
    assert new.fetcher_id == "a" and new.serial > old.serial
    assert d.snapshot().fetchers["a"].live


def test_stale_heartbeat_ignored() -> None:
    d, _, clock = make()
    d.heartbeat(Heartbeat("a", 100.0, 5, 0, 50.0, 20))
    d.heartbeat(Heartbeat("a", 99.0, 1, 0, 1.0, 1))
    snap = d.snapshot().fetchers["a"]
    assert snap.p == 50.0 and snap.q == 20 and snap.successes == 5


def test_dead_fetcher_leaves_the_average() -> None:
    d, _, clock = make()
    for fid in ("a", "b"):
        d.register(fid)
    a, b = ok(d.offer("a", "default")), ok(d.offer("b", "default"))
    d.complete(a.serial, fetcher_id="a", pages=10, elapsed_s=1.0)
    d.complete(b.serial, fetcher_id="b", pages=10, elapsed_s=3.0)
    assert d.snapshot().avg_t == pytest.approx(0.2)
    clock.now += 3.0
    d.heartbeat(hb("a", clock))
    clock.now += 1.5
    d.tick()  # b dies
    assert d.snapshot().avg_t == pytest.approx(0.1) and d.batch_size("a") == 10


def test_lease_timeout_expires_and_requeues() -> None:
    d, frontier, clock = make(lease_s=30.0)
    d.register("a")
    batch = ok(d.offer("a", "default"))
    for _ in range(20):  # stays live but never completes the batch
        clock.now += 1.5
        d.heartbeat(hb("a", clock))
        expired = d.tick()
        if expired:
            break
    assert expired == [batch.serial] and clock.now - batch.issued_at >= 30.0
    assert frontier.pending() == 1000 and not d.complete(batch.serial, fetcher_id="a", pages=1, elapsed_s=1)


def test_renewed_lease_outlives_lease_s_and_expires_once_no_longer_renewed() -> None:
    d, frontier, clock = make(lease_s=10.0)
    d.register("a")
    d.register("b")
    batch = ok(d.offer("a", "default"))
    other = ok(d.offer("b", "default"))
    for _ in range(20):  # "a" says it still holds its batch (storing through an outage), "b" says nothing
        clock.now += 1.5
        d.heartbeat(hb("a", clock))
        d.heartbeat(hb("b", clock))
        assert d.renew("a", [batch.serial, other.serial, 10**6]) == 1  # only a batch out to "a" itself
        expired = d.tick()
        assert batch.serial not in expired
    assert other.serial not in [b.serial for b in d.outstanding()]
    renewed_at = clock.now
    while not (expired := d.tick()):  # no longer held: lease_s after the last renewal it expires
        clock.now += 1.0
        d.heartbeat(hb("a", clock))
    assert expired == [batch.serial] and clock.now - renewed_at >= 10.0
    assert not d.complete(batch.serial, fetcher_id="a", pages=1, elapsed_s=1)
    assert frontier.pending() == 1000


def test_unfinished_requeued_once_and_only_if_in_batch() -> None:
    d, frontier, _ = make(urls=20)
    d.register("a")
    batch = ok(d.offer("a", "default"))
    stranger = UrlTask("http://evil.test/x", 10**9, 0)
    back = batch.tasks[:3] + batch.tasks[:1] + [stranger]
    assert d.complete(batch.serial, fetcher_id="a", pages=7, elapsed_s=0.7, unfinished=back)
    assert frontier.pending() == 13 and d.snapshot().requeued_urls == 3


def test_host_delays_and_release_after_last_batch() -> None:
    clock = Clock()
    frontier = MemoryFrontier(per_host=1)
    frontier.add([UrlTask("http://a.test/1", 1), UrlTask("http://a.test/2", 2), UrlTask("http://b.test/1", 3)])
    d = Dispatcher(DispatchSettings(k=1, n_min=1), frontier=frontier, quotas=Quotas.unlimited(),
                   serials=SerialAllocator(MemorySerialStore().reserve_serials), clock=clock,
                   max_outstanding=2)  # fmt: skip
    d.register("f")
    first, second = ok(d.offer("f", "default")), ok(d.offer("f", "default"))
    assert {first.tasks[0].url_id, second.tasks[0].url_id} == {1, 3}
    d.complete(first.serial, fetcher_id="f", pages=1, elapsed_s=1.0, host_delays={"a.test": 10.0})
    assert frontier.leased_hosts("f") == {"a.test", "b.test"}  # second batch still out: nothing released
    d.complete(second.serial, fetcher_id="f", pages=1, elapsed_s=1.0)
    assert frontier.leased_hosts("f") == set()
    refused(d.offer("f", "default"), "empty")  # a.test waits 10 s
    clock.now += 10.0
    d.register("f")  # (silent for 10 s: it must say hello again)
    assert ok(d.offer("f", "default")).tasks[0].url_id == 2


def test_register_again_expires_forgotten_batches() -> None:
    d, frontier, _ = make(urls=30)
    d.register("a")
    batch = ok(d.offer("a", "default"))
    d.register("a", k=5)  # restarted
    assert frontier.pending() == 30 and not d.complete(batch.serial, fetcher_id="a", pages=1, elapsed_s=1)
    assert len(ok(d.offer("a", "default")).tasks) == 5


def test_a_restarted_fetcher_starts_its_minute_with_nothing_given() -> None:
    """S1's r of a new incarnation: what the old one was given is expired and goes elsewhere; counted
    against it, the restarted node lost every node choice until the minute ended (a CI fault test)."""
    d, _, clock = make(Quotas({"x": 1000}))
    d.heartbeat(hb("a", clock, rate=10, free=50))
    d.heartbeat(hb("b", clock, rate=10, free=50))
    ok(d.offer("a", "x"))
    ok(d.offer("b", "x"))
    d.register("a")  # restarted
    assert dict(d.grants_this_minute()) == {"b": 10} and d.snapshot().services["x"].n == 20


def test_serials_survive_dispatcher_restart() -> None:
    store = MemorySerialStore()
    d1, _, _ = make(store=store)
    d1.register("a")
    s1 = ok(d1.offer("a", "default")).serial
    d2, _, _ = make(store=store)  # restart over the same durable store
    d2.register("a")
    s2 = ok(d2.offer("a", "default")).serial
    assert s2 > s1
    assert not d2.complete(s1, fetcher_id="a", pages=10, elapsed_s=1.0)  # pre-restart: unknown
    assert d2.snapshot().dropped == {"unknown": 1}


def test_snapshot_shape() -> None:
    d, _, clock = make(Quotas({"x": 50}))
    d.heartbeat(hb("a", clock))
    ok(d.offer("a", "x"))
    snap = d.snapshot()
    assert snap.second == 1 and snap.in_flight == 1 and snap.in_flight_urls == 10 and snap.last_serial == 1
    assert snap.services["x"].quota == 50 and snap.services["x"].batches_total == 1
    f = snap.fetchers["a"]
    assert (f.n, f.t, f.count, f.live, f.r, f.outstanding) == (10, None, 0, True, 10, 1)


def test_offer_limit_caps_the_batch() -> None:
    d, frontier, _ = make()
    d.register("a")
    assert len(ok(d.offer("a", "default", limit=3)).tasks) == 3
    d2, _, _ = make()
    d2.register("a")
    refused(d2.offer("a", "default", limit=0), "empty")
