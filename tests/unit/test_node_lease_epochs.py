"""A worker's lease epochs on the wire: a batch issued before a node's stop never runs after it.

The dispatcher expires a silent node's batches and re-issues their URLs; a batch it had published to the
node just before the stop may reach the node's fetch loop only after it continues, however late on a
loaded machine. Its incarnation names the process and the lease epoch (``<process>/<epoch>``): such a
batch is addressed to an earlier epoch, so the node hands it back unfetched, and the dispatcher, hearing
the new epoch in the heartbeat, addresses the next batches to it (seen in CI: a continued node fetched
six URLs the other node had been re-issued, its batch starting more than the quarantine after the lapse).
"""

from __future__ import annotations

from typing import Any

from fetchers.records import Batch, FetchResult, UrlTask
from pipeline.settings import load_settings
from pipeline.transport.dispatcher.nodes import FleetNodes
from pipeline.transport.node.lease import LeaseGuard
from pipeline.transport.node.runtime import FetchRuntime
from pipeline.transport.wire.messages import NodeHeartbeat, same_process
from pipeline.transport.wire.sink import SinkSpec


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _runtime(clock: Clock) -> tuple[FetchRuntime, list[int]]:
    def factory(settings: Any, node: str, scope: Any, shared: Any) -> Any:
        raise AssertionError("no batch here may reach a fetcher")

    rt = FetchRuntime(load_settings(), node="n1", slots=2, factory=factory)
    rt.lease = LeaseGuard(limit_s=0.875, quarantine_s=0.5, monotonic=clock)
    handed: list[int] = []

    class _Confirmed:
        def wait(self) -> None:
            return None

    def report_unfinished(batch: Batch) -> Any:
        handed.append(batch.serial)
        return _Confirmed()

    rt.report_unfinished = report_unfinished  # type: ignore[method-assign]
    return rt, handed


def _batch(serial: int) -> Batch:
    return Batch(serial, "n1#0", [UrlTask("http://a.test/", serial * 10)], issued_at=1.0)


def test_the_incarnation_names_the_process_and_its_lease_epoch() -> None:
    clock = Clock()
    rt, _ = _runtime(clock)
    before = rt.heartbeat().incarnation
    assert before == f"{rt.process}/0"
    clock.t += 1.05  # stopped for two heartbeat periods
    after = rt.heartbeat().incarnation  # the first heartbeat built after the stop carries the new epoch
    assert after == f"{rt.process}/1" and same_process(before, after)
    assert not same_process(before, f"other-{rt.process}/0")


def test_a_batch_addressed_before_the_lapse_is_handed_back_however_late_it_starts() -> None:
    clock = Clock()
    rt, handed = _runtime(clock)
    old = rt.incarnation
    clock.t += 1.05
    rt.lease.beat()  # the heartbeat thread ran first after the stop and saw the gap
    clock.t += 2.0  # the batch reaches the fetch loop long after the quarantine
    out = rt.run_batch(_batch(7), incarnation=old, scope=None, sink=SinkSpec(store="", segments=""))
    assert out == {"serial": 7, "dropped": "lapsed"} and handed == [7]


def test_a_batch_for_another_process_is_dropped_without_a_reply() -> None:
    rt, handed = _runtime(Clock())
    out = rt.run_batch(_batch(8), incarnation="elsewhere-1-abc/0", scope=None, sink=SinkSpec(store="", segments=""))
    assert out == {"serial": 8, "dropped": "stale_incarnation"} and handed == []


def test_a_fence_taken_before_the_lapse_stays_shut_after_the_quarantine() -> None:
    clock = Clock()
    guard = LeaseGuard(limit_s=0.875, quarantine_s=0.5, monotonic=clock)
    accepted = guard.epoch()
    clock.t += 1.05
    guard.beat()
    clock.t += 2.0
    assert not guard.fence(accepted)()  # accepted at epoch 0: shut, whenever it starts
    assert guard.fence(guard.epoch())()  # one addressed to the new epoch runs


def _hb(inc: str, sent: float) -> NodeHeartbeat:
    return NodeHeartbeat("n", inc, sent, 5, 1, 10.0, 4, 2, 0)


def test_the_dispatcher_follows_a_lapse_without_taking_it_for_a_restart() -> None:
    fleet = FleetNodes()
    assert fleet.heard(_hb("h-1-x/0", 1.0), now=0.0).event == "node_up"
    assert [n.name for n in fleet.silent(2.0, 1.0)] == ["n"]
    back = fleet.heard(_hb("h-1-x/1", 3.0), now=3.0)
    assert back.event == "node_back" and not back.restarted and back.reregister == ()
    assert fleet.nodes["n"].incarnation == "h-1-x/1"  # the next batches are addressed to the new epoch
    lapsed = fleet.heard(_hb("h-1-x/2", 4.0), now=4.0)  # a lapse too short for the dispatcher to notice
    assert lapsed.event == "node_lapsed" and fleet.nodes["n"].incarnation == "h-1-x/2"
    late = fleet.heard(_hb("h-1-x/1", 3.5), now=4.5)  # an older epoch's heartbeat published again
    assert late.event == "" and fleet.nodes["n"].incarnation == "h-1-x/2"
    restarted = fleet.heard(_hb("h-2-y/0", 5.0), now=5.0)
    assert restarted.event == "node_up" and restarted.restarted


def test_urls_answered_before_a_lapse_are_not_fetched_again_after_it() -> None:
    from pipeline.transport.node.earlier import EarlierAnswers

    seen = EarlierAnswers(limit=3)
    seen.record(_answer(1), 0, "b1")
    seen.record(_answer(2), 0, "b1")
    seen.record(_answer(3), 1, "b2")
    tasks = [UrlTask(f"http://a.test/{i}", i) for i in (1, 2, 3, 4)]
    fetch, again, earlier = seen.split(tasks, 1)  # a batch of epoch 1, after the lapse
    assert [t.url_id for t in fetch] == [3, 4] and [t.url_id for t in again] == [1, 2] and earlier == {"b1"}
    assert seen.split(tasks, 0)[1] == []  # within one epoch (a re-crawl) nothing is held back
    seen.record(_answer(5), 0, "b3")  # the oldest answer is forgotten past the limit
    assert [t.url_id for t in seen.split(tasks, 1)[1]] == [2]


def test_a_url_handed_back_unanswered_is_fetched_after_the_lapse() -> None:
    """A URL fenced before it was sent (or deferred) was not answered: remembering it handed it back for
    ever, from both nodes of a fleet whose leases lapsed under a stalled broker (the crawl never ended)."""
    from fetchers.report import DEFERRED, LEASE_LAPSED
    from pipeline.transport.node.earlier import EarlierAnswers

    seen = EarlierAnswers()
    seen.record(_answer(1, LEASE_LAPSED), 0, "b1")
    seen.record(_answer(2, DEFERRED), 0, "b1")
    seen.record(_answer(3, "http_error"), 0, "b1")  # a final answer, even a failed one, is an answer
    tasks = [UrlTask(f"http://a.test/{i}", i) for i in (1, 2, 3)]
    fetch, again, _ = seen.split(tasks, 1)
    assert [t.url_id for t in fetch] == [1, 2] and [t.url_id for t in again] == [3]
    seen.forget([3])  # its batch could not store it: it went back unfinished, and is fetched again
    assert seen.split(tasks, 1)[1] == []


def _answer(url_id: int, error_class: str = "") -> FetchResult:
    return FetchResult(f"http://a.test/{url_id}", url_id, 0, status=0 if error_class else 200, error_class=error_class)
