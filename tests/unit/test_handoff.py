"""Whole hosts leaving one frontier and joining another (pipeline/frontier/handoff.py), and the frontier's gate
for dispatcher shards (``Frontier.admit``): S5's transfer between shards, with no I/O."""

from __future__ import annotations

from pipeline.dispatch.vessels import largest_host
from pipeline.frontier.frontier import Frontier
from pipeline.frontier.handoff import Handed, hand_off, tail, take_in
from pipeline.frontier.limits import FrontierLimits
from tests.unit.test_frontier import host, urls


def test_the_tail_gives_waiting_hosts_last_in_first_and_never_a_leased_one() -> None:
    f = Frontier(FrontierLimits(active_hosts=1, max_urls_per_host_batch=2))
    for name in ("a.test", "b.test", "c.test", "d.test"):
        f.add(urls(name, 3))
    f.lease("f1", 2, now=0.0)  # a.test is active and leased; b, c, d wait
    assert tail(f, 4) == ["d.test", "c.test"]  # the queue's tail first, whole hosts until >= 4 URLs
    assert tail(f, 100) == ["d.test", "c.test", "b.test"]  # a leased host never moves
    assert tail(f, 100, skip={"c.test"}) == ["d.test", "b.test"]  # a refill read in flight
    assert tail(f, 100, below=3) == []  # hosts of 3 URLs: none fewer than 3


def test_a_host_handed_off_leaves_everything_behind_and_its_urls_stay_in_the_store() -> None:
    f = Frontier(FrontierLimits(active_hosts=1))
    f.add(urls("a.test", 2) + urls("b.test", 5))
    assert f.pending == 7
    gone = hand_off(f, "b.test")
    assert gone == Handed("b.test", 5, 0.0, "", 0)
    assert f.host("b.test") is None and f.pending == 2
    # Activation skips the inert waiting entry: a.test drains, nothing of b.test is leased.
    got = [t.url for t in f.lease("f1", 10, now=0.0)]
    assert got and all("a.test" in u for u in got)
    assert hand_off(f, "a.test") is None  # leased: stays (its lease ends here)


def test_a_host_taken_in_keeps_its_clock_address_and_page_count_and_refills_from_the_store() -> None:
    f = Frontier(FrontierLimits(max_pages_per_host=10))
    assert take_in(f, Handed("c.test", 4, not_before=50.0, ip="10.1.2.3", issued=7))
    hs = host(f, "c.test")
    assert (hs.pending, hs.next_allowed, hs.ip, hs.issued, hs.complete) == (4, 50.0, "10.1.2.3", 7, False)
    assert f.wants_refill() == ["c.test"]  # its URLs are read from the store, none travelled
    f.refill("c.test", urls("c.test", 4))
    assert f.lease("f1", 4, now=10.0) == []  # its politeness clock came with it
    assert len(f.lease("f1", 4, now=50.0)) > 0


def test_a_later_clock_given_to_a_host_in_the_ready_heap_keeps_it_leasable() -> None:
    """A host whose window waits in the ready heap gets a later clock (``Frontier.hold``, as a block's host
    the frontier already holds gets): it is leased at that time, not lost with its stale heap entry."""
    f = Frontier(FrontierLimits())
    f.add(urls("h.test", 2))
    assert host(f, "h.test").in_heap
    f.hold("h.test", 5.0)
    assert f.lease("f1", 2, now=1.0) == []
    assert len(f.lease("f1", 2, now=5.0)) == 2


def test_the_gate_keeps_other_shards_hosts_out_of_the_frontier() -> None:
    asked: list[tuple[str, int]] = []

    def admit(host_: str, n: int) -> bool:
        asked.append((host_, n))
        return host_ != "theirs.test"

    f = Frontier(admit=admit)
    f.add(urls("mine.test", 2) + urls("theirs.test", 3))
    f.add_pending("theirs.test", 5)
    assert not f.restore("theirs.test", 9)
    f.add_pending("mine.test", 4)
    assert f.host("theirs.test") is None and f.pending == 6
    assert ("mine.test", 1) in asked and ("theirs.test", 5) in asked and ("theirs.test", 9) in asked
    assert sum(1 for h, _ in asked if h == "mine.test") == 1  # asked once: the host is known after


def test_a_host_moves_only_when_it_narrows_the_gap() -> None:
    assert largest_host(0, {0: 11.0, 1: 0.0, 2: 0.0}) == 11.0  # a host of 11 would only swap the gap over
    assert largest_host(1, {0: 300.0, 1: 120.0, 2: 40.0}) == 80.0
    assert largest_host(5, {0: 1.0}) == 0.0
