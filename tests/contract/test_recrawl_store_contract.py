# ruff: noqa: F811  (pytest fixtures imported from the main contract suite)
"""The re-crawl part of the Store contract (issue #23), for SQLite and HBase: a URL's revisit state is
kept with its outcome, due URLs come back to the pending set, and a re-fetch replaces (or keeps) the page."""

from __future__ import annotations

from pipeline.storage.base import ROBOTS_SOURCE, SITEMAP_SOURCE, Outcome, Revisit, Store, UrlState
from pipeline.urls import fingerprint
from tests.contract.test_store_contract import OpenStore, done, open_store, page, rec, store  # noqa: F401

A1, A2, B1 = "http://a.test/1", "http://a.test/2", "http://b.test/1"


def rv(next_fetch: float, *, fetches: int = 1, digest: str = "d1", etag: str = '"e1"') -> Revisit:
    return Revisit(
        next_fetch, 100.0, etag, "Mon, 01 Jan 2024 00:00:00 GMT", digest, (1 << 63) + 5, 0, fetches, 1.0
    )


def fetch_all(store: Store, *urls: str, at: float = 100.0) -> None:
    store.add_urls([rec(u) for u in urls])
    store.record_results([done(u, revisit=rv(at)) for u in urls])


def test_revisit_is_kept_with_the_outcome(store: Store) -> None:
    fetch_all(store, A1)
    got = store.get_revisit(A1)
    assert got == rv(100.0)  # simhash above 2**63 survives (SQLite integers are signed)
    record = store.get_url(A1)
    assert record is not None and record.state is UrlState.DONE and record.revisit == rv(100.0)
    store.add_urls([rec(A2)])
    store.record_results([done(A2)])
    assert store.get_revisit(A2) is None


def test_due_urls_come_back_pending_with_their_revisit(store: Store) -> None:
    store.add_urls([rec(A1), rec(A2), rec(B1)])
    store.record_results(
        [done(A1, revisit=rv(100.0)), done(A2, revisit=rv(300.0)), done(B1, revisit=rv(50.0))]
    )
    assert store.requeue_due(40.0, 10) == {}
    assert store.requeue_due(150.0, 10) == {"a.test": 1, "b.test": 1}
    counts = store.counts()
    assert (counts["pending"], counts["done"], counts["pages"]) == (2, 1, 3)
    assert store.requeue_due(150.0, 10) == {}  # already pending: not counted again
    [back] = store.pending("a.test", 10)
    assert back.url == A1 and back.revisit == rv(100.0)
    assert dict(store.pending_hosts()) == {"a.test": 1, "b.test": 1}
    assert store.requeue_due(1000.0, 10) == {"a.test": 1}


def test_requeue_takes_the_earliest_due_first_and_at_most_limit(store: Store) -> None:
    store.add_urls([rec(A1), rec(A2), rec(B1)])
    store.record_results([done(A1, revisit=rv(30.0)), done(A2, revisit=rv(10.0)), done(B1, revisit=rv(20.0))])
    assert store.requeue_due(100.0, 1) == {"a.test": 1}
    assert [r.url for r in store.pending("a.test", 10)] == [A2]
    assert store.requeue_due(100.0, 1) == {"b.test": 1}


def test_requeue_for_some_hosts_takes_each_host_s_earliest_only(store: Store) -> None:
    a3, b2, c1 = "http://a.test/3", "http://b.test/2", "http://c.test/1"
    store.add_urls([rec(u) for u in (A1, A2, a3, B1, b2, c1)])
    store.record_results([done(A1, revisit=rv(30.0)), done(A2, revisit=rv(10.0)), done(a3, revisit=rv(20.0)),
                          done(B1, revisit=rv(5.0)), done(b2, revisit=rv(6.0)), done(c1, revisit=rv(1.0))])  # fmt: skip
    # c.test is due first of all, but only a.test (two) and b.test (one) are asked for
    assert store.requeue_due(100.0, 10, hosts={"a.test": 2, "b.test": 1}) == {"a.test": 2, "b.test": 1}
    assert sorted(r.url for r in store.pending("a.test", 10)) == sorted([A2, a3])
    assert [r.url for r in store.pending("b.test", 10)] == [B1]
    assert store.requeue_due(100.0, 10, hosts={"c.test": 0}) == {}
    assert store.requeue_due(100.0, 1, hosts={"a.test": 5, "c.test": 5}) == {"c.test": 1}  # limit in all


def test_a_refetch_replaces_the_page_or_keeps_it_without_one(store: Store) -> None:
    fetch_all(store, A1, A2)
    store.requeue_due(1000.0, 10)
    new_page = page(A1, b"<html>v2</html>")
    applied = store.record_results([
        Outcome(A1, fingerprint(A1), UrlState.DONE, 200, 200.0, page=new_page, revisit=rv(400.0, fetches=2, digest="d2")),
        Outcome(A2, fingerprint(A2), UrlState.DONE, 304, 200.0, revisit=rv(500.0, fetches=2)),
    ])  # fmt: skip
    assert applied == 2
    got = store.get_page(A1)
    assert got is not None and got.body == b"<html>v2</html>"
    kept = store.get_page(A2)
    assert kept is not None and kept.body == b"<html>hi</html>"
    counts = store.counts()
    assert (counts["pages"], counts["done"], counts["pending"]) == (2, 2, 0)
    revisit = store.get_revisit(A1)
    assert revisit is not None and (revisit.digest, revisit.fetches, revisit.next_fetch) == ("d2", 2, 400.0)
    # exactly-once still holds: a replay of the re-fetch's outcome changes nothing
    assert store.record_results([done(A1, revisit=rv(999.0, fetches=3))]) == 0
    assert store.requeue_due(450.0, 10) == {"a.test": 1}


def test_failed_urls_with_a_revisit_come_back_too(store: Store) -> None:
    store.add_urls([rec(A1)])
    store.record_results([done(A1, state=UrlState.FAILED, with_page=False, revisit=rv(10.0))])
    assert store.requeue_due(20.0, 10) == {"a.test": 1}
    counts = store.counts()
    assert (counts["failed"], counts["pending"]) == (0, 1)


def test_schedule_survives_a_restart(open_store: OpenStore) -> None:  # noqa: F811
    first = open_store()
    fetch_all(first, A1)
    first.close()
    again = open_store()
    assert again.get_revisit(A1) == rv(100.0)
    assert again.requeue_due(200.0, 10) == {"a.test": 1}


def test_put_revisits_schedules_urls_recorded_without_one(store: Store) -> None:
    """The fleet's update job schedules URLs a node recorded DONE: a rewrite moves the due time."""
    store.add_urls([rec(A1), rec(A2)])
    store.record_results([done(A1), done(A2)])
    assert store.put_revisits([(A1, rv(50.0)), ("http://unknown.test/", rv(1.0))]) == 1
    assert store.get_revisit(A1) == rv(50.0) and store.get_revisit("http://unknown.test/") is None
    assert store.put_revisits([(A1, rv(500.0))]) == 1  # rescheduled later: not due at 100 any more
    assert store.requeue_due(100.0, 10) == {}
    assert store.requeue_due(600.0, 10) == {"a.test": 1}
    assert store.put_revisits([]) == 0


def test_refetches_only_reads_the_due_urls_never_a_new_one(store: Store) -> None:
    """What a host at ``scope.max_pages_per_host`` may still fetch in a re-crawl: its URLs PENDING again
    (with their revisit), not the new ones, although those sort first (shallower) in a plain read."""
    deep = [f"http://a.test/old/{i}" for i in range(4)]
    store.add_urls([rec(u, 5) for u in deep] + [rec(B1, 5)])
    store.record_results([done(u, revisit=rv(10.0)) for u in [*deep, B1]])
    new = [f"http://a.test/new/{i}" for i in range(6)]
    store.add_urls([rec(u, 1) for u in new])
    assert store.pending("a.test", 10, refetches_only=True) == []
    assert store.requeue_due(20.0, 3) != {}  # three of the five come back
    back = store.pending("a.test", 10, refetches_only=True)
    assert {r.url for r in back} <= set(deep) and all(r.revisit is not None for r in back)
    assert {r.url for r in store.pending("a.test", 4)} == set(new[:4])  # a plain read: new ones first
    assert store.requeue_due(20.0, 10) != {}
    assert [r.url for r in store.pending("b.test", 10, refetches_only=True)] == [B1]
    back = store.pending("a.test", 10, refetches_only=True)
    assert sorted(r.url for r in back) == deep
    assert [r.url for r in store.pending("a.test", 2, refetches_only=True)] == [r.url for r in back[:2]]
    # A failed re-fetch to retry stays a re-fetch; so does one a sitemap's lastmod reschedules meanwhile.
    store.record_results([done(deep[0], state=UrlState.PENDING, with_page=False, retries=1)])
    assert store.put_revisits([(deep[1], rv(5.0, fetches=1))]) == 1
    assert store.requeue_due(30.0, 10) == {}  # neither is taken a second time
    # A finished re-fetch leaves the set.
    store.record_results([done(u, revisit=rv(500.0, fetches=2)) for u in (deep[2], B1)])
    assert sorted(r.url for r in store.pending("a.test", 10, refetches_only=True)) == [deep[0], deep[1], deep[3]]
    assert store.pending("b.test", 10, refetches_only=True) == []


def test_taken_per_host_counts_a_url_pending_again_once(store: Store) -> None:
    """A due URL PENDING again was taken: a resume's host cap counts it, once (distinct URLs)."""
    fetch_all(store, A1, A2, B1, at=10.0)
    store.add_urls([rec("http://a.test/new")])
    assert store.requeue_due(20.0, 10) == {"a.test": 2, "b.test": 1}
    assert store.taken_per_host() == {"a.test": 2, "b.test": 1}
    store.record_results([done(A1, revisit=rv(99.0, fetches=2))])
    assert store.taken_per_host() == {"a.test": 2, "b.test": 1}


def test_robots_and_sitemap_files_are_not_pages_to_the_host_cap(store: Store) -> None:
    """robots.txt and sitemap files (``UrlRecord.infra``) are fetched to find pages: ``taken_per_host`` does
    not count them, and a capped host's re-fetches-only read returns them while they wait, unfetched or
    due again, never a new page. Before, they spent the host's cap like pages."""
    robots, files = "http://a.test/robots.txt", ["http://a.test/sitemap.xml", "http://a.test/sm/2.xml.gz"]
    store.add_urls([rec(robots, 0, frm=ROBOTS_SOURCE)])
    store.add_urls([rec(files[0], 1, frm=SITEMAP_SOURCE)])
    fetch_all(store, A1, at=10.0)
    store.record_results([done(u, revisit=rv(10.0)) for u in (robots, files[0])])
    store.add_urls([rec(files[1], 2, frm=SITEMAP_SOURCE), rec("http://a.test/new", 1)])
    assert store.taken_per_host() == {"a.test": 1}  # A1 only
    assert [r.url for r in store.pending("a.test", 10, refetches_only=True)] == [files[1]]
    assert store.pending("a.test", 10, refetches_only=True)[0].infra
    assert store.requeue_due(20.0, 10) == {"a.test": 3}  # A1, robots.txt and the fetched file
    assert store.taken_per_host() == {"a.test": 1}
    back = store.pending("a.test", 10, refetches_only=True)
    assert sorted(r.url for r in back) == sorted([A1, robots, *files]) and len(back) == 4  # each once
    assert len(store.pending("a.test", 2, refetches_only=True)) == 2
    store.record_results([done(u, revisit=rv(500.0, fetches=2)) for u in (robots, *files)])
    assert [r.url for r in store.pending("a.test", 10, refetches_only=True)] == [A1]
