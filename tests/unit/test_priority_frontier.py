"""Priority in the frontier (#23 point 5): each host's window by in-link count, then depth; politeness unchanged."""

from __future__ import annotations

from pipeline.frontier.frontier import Frontier
from pipeline.frontier.limits import FrontierLimits
from pipeline.storage.base import UrlRecord
from pipeline.urls import fingerprint


def _rec(path: str, *, inlinks: int, depth: int = 1, host: str = "a.test") -> UrlRecord:
    url = f"http://{host}{path}"
    return UrlRecord(url, fingerprint(url), host, depth, inlinks=inlinks)


def test_refill_orders_a_hosts_window_by_inlinks_then_depth() -> None:
    f = Frontier(FrontierLimits(window_per_host=16, max_urls_per_host_batch=16))
    records = [_rec(f"/p{i}", inlinks=i % 4, depth=1 + i % 3) for i in range(12)]
    f.add_pending("a.test", len(records))
    assert f.wants_refill() == ["a.test"]
    f.refill("a.test", records)  # the store's order (depth, url): the frontier re-orders by score
    got = f.lease("w", 16, now=0.0)
    want = sorted(records, key=lambda r: (-r.inlinks, r.depth, records.index(r)))
    assert [t.url for t in got] == [r.url for r in want]


def test_without_priority_the_window_keeps_the_stores_order() -> None:
    f = Frontier(FrontierLimits(window_per_host=16, max_urls_per_host_batch=16, priority=False))
    records = [_rec(f"/p{i}", inlinks=i) for i in range(6)]
    f.add_pending("a.test", len(records))
    f.refill("a.test", records)
    assert [t.url for t in f.lease("w", 16, now=0.0)] == [r.url for r in records]


def test_priority_never_bends_politeness() -> None:
    """A host's high-score URLs wait for its delay like any other; one lease per host; batch cap holds."""
    f = Frontier(FrontierLimits(window_per_host=16, max_urls_per_host_batch=2))
    hot = [_rec(f"/hot{i}", inlinks=100, host="hot.test") for i in range(4)]
    cold = [_rec(f"/cold{i}", inlinks=0, host="cold.test") for i in range(4)]
    f.add(cold)
    f.add(hot)
    first = f.lease("w1", 10, now=0.0)
    assert len(first) == 4  # two of each host: the per-host batch cap, whatever the score
    assert f.lease("w2", 10, now=0.0) == []  # both hosts leased: a second fetcher gets nothing
    f.release("w1", 0.0, host_delays={"hot.test": 5.0, "cold.test": 1.0})
    second = f.lease("w1", 10, now=2.0)
    assert {t.url.split("/")[2] for t in second} == {"cold.test"}  # the hot host still waits for its delay
    f.release("w1", 2.0, host_delays={"cold.test": 1.0})
    assert {t.url.split("/")[2] for t in f.lease("w1", 10, now=5.0)} == {"hot.test"}


def test_added_urls_queue_in_arrival_order_and_a_refill_reorders_them() -> None:
    """``add`` appends to an open window (no per-URL sort); the next refill reads the scores again."""
    f = Frontier(FrontierLimits(window_per_host=16, max_urls_per_host_batch=16))
    f.add([_rec("/a", inlinks=1), _rec("/b", inlinks=1), _rec("/hub", inlinks=7, depth=2)])
    assert [t.url.rsplit("/", 1)[1] for t in f.lease("w", 16, now=0.0)] == ["a", "b", "hub"]
    f.release("w", 0.0)
    f.add_pending("a.test", 3)  # the link jobs counted more in-links: the store has them, a refill reads them
    f.refill("a.test", [_rec("/c", inlinks=1), _rec("/d", inlinks=2), _rec("/hub2", inlinks=9, depth=3)])
    assert [t.url.rsplit("/", 1)[1] for t in f.lease("w", 16, now=1.0)] == ["hub2", "d", "c"]
