"""The host cap in a re-crawl: ``scope.max_pages_per_host`` counts the distinct URLs a host gives, so due
re-fetches are never charged, and a capped host keeps re-fetching the URLs it took while its new ones stay
PENDING in the store. Before, re-fetches counted as pages, and a capped host was never leased again: the
collection of every capped host went stale for good."""

from __future__ import annotations

from pipeline.frontier.frontier import Frontier
from pipeline.frontier.hostqueue import HostQueue
from pipeline.frontier.limits import FrontierLimits
from pipeline.storage.base import ROBOTS_SOURCE, SITEMAP_SOURCE, Revisit, UrlRecord
from pipeline.urls import fingerprint, host_of

CAPPED = FrontierLimits(max_pages_per_host=3, recrawl=True, priority=False)
SEEN = Revisit(0.0, 10.0, "", "", "d", 0, 0, 1, 0.0)


def new(path: str, depth: int = 0) -> UrlRecord:
    url = f"http://a.test/{path}"
    return UrlRecord(url, fingerprint(url), host_of(url), depth)


def due(path: str, depth: int = 0) -> UrlRecord:
    out = new(path, depth)
    out.revisit = SEEN
    return out


def lease_all(f: Frontier, now: float = 0.0) -> list[str]:
    got = f.lease("f1", 100, now=now)
    f.release("f1", now)
    return [t.url.rsplit("/", 1)[1] for t in got]


def test_refetches_are_not_charged_to_the_host_cap() -> None:
    f = Frontier(CAPPED)
    f.add([new("n1"), new("n2")])
    assert lease_all(f) == ["n1", "n2"]
    f.add_pending("a.test", 2, refetch=True)  # the re-crawl's due URLs, in the store
    assert f.wants_refill() == ["a.test"] and not f.refetches_only("a.test")
    f.refill("a.test", [due("n1"), due("n2")])
    got = f.lease("f1", 100, now=0.0)
    assert [t.uncharged for t in got] == [True, True]
    f.release("f1", 0.0)
    f.add([new("n3"), new("n4")])
    assert lease_all(f) == ["n3"]  # three distinct URLs: n4 stays PENDING in the store
    assert f.capped("a.test") and f.refetches_only("a.test")


def test_a_capped_host_keeps_refetching_what_it_took() -> None:
    f = Frontier(CAPPED)
    f.add([new(f"n{i}") for i in range(5)])
    assert lease_all(f) == ["n0", "n1", "n2"]
    assert lease_all(f) == []  # n3, n4 are new: the window goes, a refill reads re-fetches only
    assert f.wants_refill() == ["a.test"] and f.refetches_only("a.test")
    f.refill("a.test", [])  # none due yet: the store is the truth, nothing pending
    assert f.pending == 0 and f.wants_refill() == []
    f.add_pending("a.test", 4)  # new URLs the link jobs found: skipped
    f.add([new("n9")])
    assert f.pending == 0
    f.add_pending("a.test", 2, refetch=True)
    assert f.pending == 2 and f.wants_refill() == ["a.test"]
    f.refill("a.test", [due("n0"), due("n2")])
    assert lease_all(f) == ["n0", "n2"]
    assert f.pending == 0


def test_without_recrawl_a_capped_host_is_done() -> None:
    f = Frontier(FrontierLimits(max_pages_per_host=3, priority=False))
    f.add([new(f"n{i}") for i in range(5)])
    assert lease_all(f) == ["n0", "n1", "n2"]
    assert lease_all(f) == [] and f.pending == 0 and f.wants_refill() == []
    assert not f.refetches_only("a.test")


def test_a_window_of_new_and_due_urls_takes_due_ones_past_the_cap() -> None:
    f = Frontier(CAPPED)
    f.charge_taken({"a.test": 2})
    assert f.restore("a.test", 5)
    f.refill("a.test", [new("n1"), due("o1"), new("n2"), due("o2"), new("n3")])
    assert lease_all(f) == ["n1", "o1"]  # n1 is the third URL; n2 would be a fourth
    assert lease_all(f) == []
    assert f.refetches_only("a.test") and f.wants_refill() == ["a.test"]
    f.refill("a.test", [due("o2")])
    assert lease_all(f) == ["o2"] and f.pending == 0


def test_a_refetch_given_back_was_never_charged() -> None:
    f = Frontier(CAPPED)
    f.add([new("n1"), new("n2"), new("n3")])
    assert lease_all(f) == ["n1", "n2", "n3"]
    f.add_pending("a.test", 1, refetch=True)
    f.refill("a.test", [due("n1")])
    got = f.lease("f1", 100, now=0.0)
    f.requeue("f1", got)  # an unfinished batch: the re-fetch comes back, the cap stays spent
    f.release("f1", 0.0)
    f.add([new("n4")])
    assert f.capped("a.test") and lease_all(f) == ["n1"]


def test_a_capped_host_is_restored_for_its_refetches_in_a_recrawl() -> None:
    """On resume, a capped host's pending count mixes new URLs and due ones: it is restored as an upper
    bound (a plain crawl skips it), and its first refill, re-fetches only, corrects it."""
    f = Frontier(CAPPED)
    f.charge_taken({"a.test": 3})
    assert f.restore("a.test", 40)
    assert f.pending == 40 and f.wants_refill() == ["a.test"] and f.refetches_only("a.test")
    f.refill("a.test", [due("o1")])
    assert f.pending == 1 and lease_all(f) == ["o1"]
    plain = Frontier(FrontierLimits(max_pages_per_host=3))
    plain.charge_taken({"a.test": 3})
    assert not plain.restore("a.test", 40) and plain.pending == 0


def test_the_host_queue_keeps_the_refetch_mark() -> None:
    q = HostQueue("a.test")
    q.append("http://a.test/x", 1, 3, uncharged=True)
    q.append("https://a.test/y", 2, 100_000)
    assert q.head_uncharged()
    x = q.popleft()
    assert (x.url, x.depth, x.uncharged) == ("http://a.test/x", 3, True)
    assert not q.head_uncharged()
    y = q.popleft()
    assert (y.url, y.depth, y.uncharged) == ("https://a.test/y", (1 << 14) - 1, False)
    assert not q.head_uncharged()
    q.appendleft(x)
    assert q.head_uncharged()


def infra(path: str, source: str = SITEMAP_SOURCE) -> UrlRecord:
    out = new(path)
    out.discovered_from = source
    return out


def test_robots_and_sitemap_files_are_not_charged_and_a_capped_host_still_takes_them() -> None:
    """The cap counts pages: robots.txt and sitemap files (``UrlRecord.infra``) are fetched to find
    them, whether they come with a discovery (``add``) or a refill, before or after the host is capped."""
    f = Frontier(CAPPED)
    f.add([infra("robots.txt", ROBOTS_SOURCE), new("n0"), infra("sitemap.xml"), new("n1"), new("n2"), new("n3")])
    assert lease_all(f) == ["robots.txt", "n0", "sitemap.xml", "n1", "n2"]  # three pages and the two files
    assert f.capped("a.test")
    f.add([infra("sm/2.xml")])  # a sitemap index's child, found after the cap: behind n3 in the window
    assert lease_all(f) == []  # n3 is a new page: the window goes, and the store is read again
    assert f.wants_refill() == ["a.test"] and f.refetches_only("a.test")
    f.refill("a.test", [infra("sm/2.xml"), due("n0")])  # what the re-fetches-only read returns
    got = f.lease("f1", 100, now=0.0)
    assert [(t.url.rsplit("/", 1)[1], t.uncharged) for t in got] == [("2.xml", True), ("n0", True)]
    f.requeue("f1", got)  # given back: nothing was charged, so nothing is refunded
    f.release("f1", 0.0)
    assert f.capped("a.test") and lease_all(f) == ["2.xml", "n0"]
    f.add([infra("sm/3.xml"), new("n9")])  # an empty window takes a file found now, never a new page
    assert lease_all(f) == ["3.xml"]
