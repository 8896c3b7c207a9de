"""One contract suite for every Store: SQLite (embedded) and HBase (the real Thrift server).

``open_store()`` opens the store under test; calling it again after ``close()`` reopens the same data,
which is how durability across restarts is checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from fetchers.bodycodec import pack_lz4
from pipeline.storage.base import Outcome, PageRecord, Store, UrlRecord, UrlState
from pipeline.urls import fingerprint, host_of
from tests.fixtures.hbase import wipe_hbase

OpenStore = Callable[[], Store]


@pytest.fixture(params=["sqlite", pytest.param("hbase", marks=pytest.mark.integration)])
def open_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenStore]:
    opened: list[Store] = []
    if request.param == "sqlite":
        from pipeline.storage.sqlite import SqliteStore

        path = tmp_path_factory.mktemp("store") / "crawl.db"

        def make() -> Store:
            return SqliteStore(path)
    else:
        from pipeline.storage.hbase import HBaseStore

        host, port = request.getfixturevalue("hbase_thrift")
        prefix = request.getfixturevalue("hbase_prefix")

        def make() -> Store:
            return HBaseStore(host, port, prefix=prefix, batch_size=100, retry_seconds=60)

    def open_() -> Store:
        store = make()
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()
    if request.param == "hbase":
        wipe_hbase(request.getfixturevalue("hbase_prefix"))


@pytest.fixture
def store(open_store: OpenStore) -> Store:
    return open_store()


def rec(url: str, depth: int = 0, *, inlinks: int = 0, frm: str = "") -> UrlRecord:
    return UrlRecord(url, fingerprint(url), host_of(url), depth, discovered_from=frm, inlinks=inlinks)


def page(url: str, body: bytes = b"<html>hi</html>", **kw: object) -> PageRecord:
    fields: dict[str, object] = {"headers": {"content-type": "text/html"}, "ip": "127.0.0.1", "serial": 7}
    fields.update(kw)
    return PageRecord(url, fingerprint(url), url, 200, "text/html", body, 1234.5, **fields)  # type: ignore[arg-type]


def done(url: str, *, state: UrlState = UrlState.DONE, with_page: bool = True, **kw: object) -> Outcome:
    return Outcome(url, fingerprint(url), state, 200, 1234.5, "sig", page=page(url) if with_page else None, **kw)  # type: ignore[arg-type]


# --- crawl database and seen-set -------------------------------------------------------------------
def test_add_urls_returns_exactly_the_new_ones(store: Store) -> None:
    first = store.add_urls([rec("http://a.test/1"), rec("http://a.test/2"), rec("http://a.test/1")])
    assert sorted(r.url for r in first) == ["http://a.test/1", "http://a.test/2"]
    again = store.add_urls([rec("http://a.test/2"), rec("http://a.test/3")])
    assert [r.url for r in again] == ["http://a.test/3"]
    assert store.add_urls([]) == []
    assert store.counts()["pending"] == 3


def test_known_urls_only_get_inlinks(store: Store) -> None:
    store.add_urls([rec("http://a.test/x", 2, inlinks=1, frm="http://a.test/")])
    store.add_urls([rec("http://a.test/x", 0), rec("http://a.test/x", 0)])  # duplicates count once: +1
    store.add_urls([rec("http://a.test/x", 5, inlinks=3, frm="http://other.test/")])  # +3
    got = store.get_url("http://a.test/x")
    assert got is not None
    assert (got.inlinks, got.depth, got.discovered_from) == (5, 2, "http://a.test/")


def test_add_urls_without_counting_leaves_known_urls_alone(store: Store) -> None:
    store.add_urls([rec("http://a.test/y", 1, inlinks=2)])
    new = store.add_urls([rec("http://a.test/y", 0, inlinks=5), rec("http://a.test/z", 1)], count_inlinks=False)
    assert [r.url for r in new] == ["http://a.test/z"]
    got = store.get_url("http://a.test/y")
    assert got is not None and got.inlinks == 2
    assert store.counts()["pending"] == 2


def test_new_urls_are_stored_pending_whatever_state_they_carry(store: Store) -> None:
    r = rec("http://a.test/s")
    r.state = UrlState.DONE
    [new] = store.add_urls([r])
    assert new.state == UrlState.PENDING
    got = store.get_url("http://a.test/s")
    assert got is not None and got.state == UrlState.PENDING


def test_seen_is_the_known_subset(store: Store) -> None:
    store.add_urls([rec("http://a.test/1"), rec("https://b.test:8443/q?x=1")])
    assert store.seen(["http://a.test/1", "http://a.test/9", "https://b.test:8443/q?x=1"]) == {
        "http://a.test/1",
        "https://b.test:8443/q?x=1",
    }
    assert store.seen([]) == set()


def test_iter_url_ids_never_yields_an_unknown_fingerprint(store: Store) -> None:
    urls = ["http://a.test/1", "https://b.test:8443/q?x=1"]
    store.add_urls([rec(u) for u in urls])
    got = set(store.iter_url_ids())
    assert got <= {fingerprint(u) for u in urls}  # a remote store may yield fewer (none), never others


def test_get_url_round_trips_every_field(store: Store) -> None:
    store.add_urls([rec("http://a.test/p", 3, inlinks=2, frm="http://a.test/")])
    got = store.get_url("http://a.test/p")
    assert got == UrlRecord(
        "http://a.test/p", fingerprint("http://a.test/p"), "a.test", 3, UrlState.PENDING, "http://a.test/", 2
    )
    assert store.get_url("http://a.test/unknown") is None


def test_get_urls_reads_many_rows_in_one_call_and_leaves_unknown_ones_out(store: Store) -> None:
    store.add_urls([rec("http://a.test/1"), rec("http://b.test/2", 2)])
    store.record_results([done("http://a.test/1")])
    got = store.get_urls(["http://a.test/1", "http://b.test/2", "http://never.test/", "http://a.test/1"])
    assert set(got) == {"http://a.test/1", "http://b.test/2"}
    assert got["http://a.test/1"] == store.get_url("http://a.test/1")
    assert got["http://a.test/1"].fetched_at == 1234.5 and got["http://b.test/2"].state is UrlState.PENDING
    assert store.get_urls([]) == {}


# --- pending set ---------------------------------------------------------------------------------
def test_pending_is_shallowest_first_then_by_url_and_pages_with_after(store: Store) -> None:
    urls = [("http://a.test/b", 1), ("http://a.test/a", 1), ("http://a.test/z", 0), ("https://a.test/0", 0),
            ("http://a.test/c", 2), ("http://a.test/", 1)]  # fmt: skip
    store.add_urls([rec(u, d) for u, d in urls])
    expected = sorted(urls, key=lambda ud: (ud[1], ud[0]))
    assert [(r.url, r.depth) for r in store.pending("a.test", 100)] == expected
    assert [r.url for r in store.pending("a.test", 2)] == [u for u, _ in expected[:2]]
    paged: list[str] = []
    after = None
    while batch := store.pending("a.test", 2, after=after):
        paged += [r.url for r in batch]
        after = (batch[-1].depth, batch[-1].url)
    assert paged == [u for u, _ in expected]


def test_pending_keeps_hosts_apart(store: Store) -> None:
    hosts = ["a.test", "a.test:8080", "aa.test", "www.a.test", "[::1]:8080", "127.0.0.1"]
    store.add_urls([rec(f"http://{h}/p{i}") for h in hosts for i in range(3)])
    for h in hosts:
        got = store.pending(h, 10)
        assert [r.url for r in got] == [f"http://{h}/p{i}" for i in range(3)]
        assert all(r.host == h for r in got)
    assert store.pending("nothing.test", 10) == []
    assert sorted(store.pending_hosts()) == sorted((h, 3) for h in hosts)
    assert len(store.pending_hosts(limit=2)) == 2


# --- results -------------------------------------------------------------------------------------
def test_record_results_is_exactly_once(store: Store) -> None:
    store.add_urls([rec("http://a.test/1"), rec("http://a.test/2")])
    assert store.record_results([done("http://a.test/1"), done("http://a.test/1")]) == 1
    assert store.record_results([done("http://a.test/1"), done("http://a.test/2")]) == 1
    assert store.record_results([done("http://a.test/1"), done("http://a.test/2")]) == 0
    assert store.record_results([done("http://never.test/")]) == 0
    assert store.record_results([]) == 0
    assert store.counts()["pages"] == 2
    assert store.get_url("http://never.test/") is None


def test_record_results_moves_states_and_counts(store: Store) -> None:
    names = {UrlState.DONE: "d", UrlState.FAILED: "f", UrlState.BLOCKED: "b", UrlState.SKIPPED: "s"}
    store.add_urls([rec(f"http://a.test/{n}") for n in names.values()] + [rec("http://b.test/")])
    applied = store.record_results(
        [done(f"http://a.test/{n}", state=s, with_page=s == UrlState.DONE, error="e" if s != UrlState.DONE else "")
         for s, n in names.items()]
    )  # fmt: skip
    assert applied == 4
    assert store.counts() == {"pending": 1, "done": 1, "failed": 1, "blocked": 1, "skipped": 1, "pages": 1}
    assert store.pending("a.test", 10) == []
    assert store.pending_hosts() == [("b.test", 1)]
    failed = store.get_url("http://a.test/f")
    assert failed is not None
    assert (failed.state, failed.status, failed.fetched_at, failed.signature, failed.error) == (
        UrlState.FAILED, 200, 1234.5, "sig", "e")  # fmt: skip
    assert store.get_page("http://a.test/f") is None


def test_taken_per_host_counts_what_fetchers_finished(store: Store) -> None:
    """What ``scope.max_pages_per_host`` counted before a restart: DONE, FAILED and BLOCKED URLs per host;
    not PENDING ones, nor SKIPPED (a redirect chain's hops, settled without a lease)."""
    names = {UrlState.DONE: "d", UrlState.FAILED: "f", UrlState.BLOCKED: "b", UrlState.SKIPPED: "s"}
    store.add_urls([rec(f"http://{h}/{n}") for h in ("a.test", "a.test:8080") for n in names.values()]
                   + [rec("http://a.test/left"), rec("http://b.test/")])  # fmt: skip
    assert store.taken_per_host() == {}
    store.record_results([done(f"http://{h}/{n}", state=s, with_page=s == UrlState.DONE)
                          for h in ("a.test", "a.test:8080") for s, n in names.items()])  # fmt: skip
    store.record_results([done("http://a.test:8080/left", state=UrlState.FAILED, with_page=False)])  # unknown
    assert store.taken_per_host() == {"a.test": 3, "a.test:8080": 3}


def test_a_redirect_targets_hops_round_trip(store: Store) -> None:
    """``UrlRecord.redirect_hops``: kept from a URL's first discovery, read back by get_url and pending."""
    target = "http://a.test/r/3"
    store.add_urls([UrlRecord(target, fingerprint(target), "a.test", 2, redirect_hops=4), rec("http://a.test/p")])
    store.add_urls([UrlRecord(target, fingerprint(target), "a.test", 2, redirect_hops=1)])
    assert {r.url: r.redirect_hops for r in store.pending("a.test", 10)} == {target: 4, "http://a.test/p": 0}
    got = store.get_url(target)
    assert got is not None and got.redirect_hops == 4


def test_a_retry_outcome_stays_pending(store: Store) -> None:
    store.add_urls([rec("http://a.test/r")])
    assert store.record_results([done("http://a.test/r", state=UrlState.PENDING, with_page=False, retries=1,
                                      error="timeout")]) == 1  # fmt: skip
    got = store.get_url("http://a.test/r")
    assert got is not None and (got.state, got.retries, got.error) == (UrlState.PENDING, 1, "timeout")
    assert [r.url for r in store.pending("a.test", 5)] == ["http://a.test/r"]
    assert store.counts()["pending"] == 1
    assert store.record_results([done("http://a.test/r")]) == 1


def test_pages_round_trip(store: Store) -> None:
    body = bytes(range(256)) * 100 + b"\x00"
    urls = ["http://a.test/bin", "http://a.test/empty", "http://a.test/meta"]
    store.add_urls([rec(u) for u in urls])
    pages = {
        urls[0]: page(urls[0], body),
        urls[1]: page(urls[1], b""),
        urls[2]: page(urls[2], b"x", headers={"x-ünï": "välue", "set-cookie": "a=b"}, truncated=True,
                      redirects=["http://a.test/old", "http://a.test/older"], serial=2**40, ip="::1"),
    }  # fmt: skip
    store.record_results([Outcome(u, fingerprint(u), UrlState.DONE, 200, 1.0, page=p) for u, p in pages.items()])
    for u, p in pages.items():
        assert store.get_page(u) == p
    assert store.get_page("http://a.test/none") is None
    assert sorted(p.url for p in store.iter_pages()) == sorted(urls)


def test_pages_given_in_the_journals_lz4_form_read_back_whole(store: Store) -> None:
    """The crawl hands the store the body twice: as is and LZ4-packed (``body_lz4``); a store may keep
    either, and reads back the body itself."""
    body = b"<html>" + b"<p>same words again</p>" * 400 + b"\xff\x00</html>"
    urls = ["http://a.test/packed", "http://a.test/packed-empty"]
    store.add_urls([rec(u) for u in urls])
    given = {urls[0]: page(urls[0], body, body_lz4=pack_lz4(body)), urls[1]: page(urls[1], b"", body_lz4=b"")}
    store.record_results([Outcome(u, fingerprint(u), UrlState.DONE, 200, 1.0, page=p) for u, p in given.items()])
    for u, p in given.items():
        got = store.get_page(u)
        assert got is not None and got.body == p.body and got == p


def test_iter_pages_yields_every_page_once(store: Store) -> None:
    urls = [f"http://h{i % 7}.test/p{i}" for i in range(150)]
    store.add_urls([rec(u) for u in urls])
    store.record_results([done(u) for u in urls])
    assert sorted(p.url for p in store.iter_pages()) == sorted(urls)


def test_large_batches_are_one_call(store: Store) -> None:
    urls = [f"http://h{i % 13}.test/p/{i}" for i in range(1234)]
    assert len(store.add_urls([rec(u) for u in urls])) == 1234
    assert store.seen(urls + ["http://h1.test/zzz"]) == set(urls)
    assert sum(n for _, n in store.pending_hosts()) == 1234
    assert store.record_results([done(u, with_page=i % 2 == 0) for i, u in enumerate(urls)]) == 1234
    assert store.counts()["done"] == 1234 and store.counts()["pages"] == 617
    assert store.pending_hosts() == []


def test_odd_but_normalized_urls(store: Store) -> None:
    urls = ["http://xn--mnchen-3ya.test/%C3%BC?q=%20&a=1", "http://[2001:db8::1]:8080/a", "https://1.2.3.4/",
            "http://a.test/a;b=c/d?e=f&g", "http://a_b.test/"]  # fmt: skip
    store.add_urls([rec(u) for u in urls])
    assert store.seen(urls) == set(urls)
    for u in urls:
        got = store.get_url(u)
        assert got is not None and got.url == u
        assert [r.url for r in store.pending(host_of(u), 5)] == [u]


# --- counters, serials, metadata, durability -----------------------------------------------------
def test_counts_names_every_state(store: Store) -> None:
    assert store.counts() == {"pending": 0, "done": 0, "failed": 0, "blocked": 0, "skipped": 0, "pages": 0}


def test_serials_increase_and_survive_reopen(open_store: OpenStore) -> None:
    store = open_store()
    a, b, empty = store.reserve_serials(5), store.reserve_serials(3), store.reserve_serials(0)
    assert len(a) == 5 and len(b) == 3 and len(empty) == 0
    assert min(a) >= 1 and max(a) < min(b)
    store.close()
    c = open_store().reserve_serials(2)
    assert min(c) > max(b)


def test_meta_and_state_survive_reopen(open_store: OpenStore) -> None:
    store = open_store()
    assert store.get_meta("k") is None
    store.put_meta("k", "v1")
    store.put_meta("k", "v2 ü")
    store.add_urls([rec("http://a.test/1"), rec("http://a.test/2", 1)])
    store.record_results([done("http://a.test/1")])
    store.flush()
    store.close()
    again = open_store()
    assert again.get_meta("k") == "v2 ü"
    assert [r.url for r in again.pending("a.test", 10)] == ["http://a.test/2"]
    assert again.get_page("http://a.test/1") == page("http://a.test/1")
    assert again.counts()["done"] == 1 and again.counts()["pending"] == 1
    assert again.add_urls([rec("http://a.test/1")]) == []
