"""The HBase store's table layout on the real server. The block cache serves the hot families (Thrift1 turns
it off unless asked). Blind per-round in-link cells (``pipeline/storage/hbase_inlinks.py``): counts across
many rounds equal the sum of what each round found, whether a row folded or not; a round run again under its
id (after a kill) adds nothing, in every order of fold and blind put; the refill and get paths read the same
counts; a round id of another form, and a crawl db made before family n, count read-then-put."""

from __future__ import annotations

import random
from collections.abc import Iterator

import happybase
import pytest

from pipeline.storage.base import UrlRecord
from pipeline.storage.hbase import HBaseStore
from pipeline.storage.hbase_cells import FOLDED, INLINKS, inlinks_of
from pipeline.storage.hbase_inlinks import fold_chosen
from pipeline.storage.rowkey import row_key
from pipeline.urls import fingerprint, host_of
from tests.fixtures.hbase import drop_prefix, wipe_hbase

pytestmark = pytest.mark.integration

URLS = [f"http://blind{h}.test/p{i}" for h in range(3) for i in range(40)]


def rec(url: str, inlinks: int = 1) -> UrlRecord:
    return UrlRecord(url, fingerprint(url), host_of(url), 1, inlinks=inlinks)


def round_id(n: int) -> str:
    return f"r{1_700_000_000_000_000_000 + n:020d}{n:08x}"


@pytest.fixture
def store(hbase_thrift: tuple[str, int], hbase_prefix: str) -> Iterator[HBaseStore]:
    host, port = hbase_thrift
    st = HBaseStore(host, port, prefix=hbase_prefix, batch_size=100, retry_seconds=60)
    yield st
    st.close()
    wipe_hbase(hbase_prefix)


def crawldb(store: HBaseStore, hbase_thrift: tuple[str, int]) -> dict[bytes, dict[bytes, bytes]]:
    conn = happybase.Connection(*hbase_thrift, table_prefix=store.prefix)
    try:
        return dict(conn.table("crawldb").scan(columns=[b"m:u", b"m:n", FOLDED, INLINKS]))
    finally:
        conn.close()


def run_round(store: HBaseStore, n: int, counts: dict[str, int], *, part: float = 1.0) -> None:
    """Round ``n`` raises ``counts`` as the link jobs' update step does: the first half of the URLs through
    ``add_urls`` (seen-cache misses), the rest through ``raise_inlinks`` (hits); ``part`` < 1 stops early,
    as a kill would."""
    store.set_link_round(round_id(n))
    items = list(counts.items())[: int(len(counts) * part)]
    half = len(items) // 2
    store.add_urls([rec(u, c) for u, c in items[:half]])
    store.raise_inlinks([rec(u, c) for u, c in items[half:]])


def test_counts_over_many_rounds_are_the_sum_and_rows_stay_small(store: HBaseStore,
                                                                   hbase_thrift: tuple[str, int]) -> None:
    rng = random.Random(7)
    want = {u: 1 for u in URLS}
    store.set_link_round(round_id(0))
    assert store.blind_inlinks
    assert len(store.add_urls([rec(u) for u in URLS])) == len(URLS)
    for n in range(1, 41):
        found = {u: rng.randint(1, 5) for u in rng.sample(URLS, 60)}
        run_round(store, n, found)
        for u, c in found.items():
            want[u] += c
    rows = crawldb(store, hbase_thrift)
    assert {r[b"m:u"].decode(): inlinks_of(r) for r in rows.values()} == want
    folded = [r for r in rows.values() if r.get(FOLDED, b"") > round_id(0).encode()]
    assert folded, "40 rounds over 120 URLs fold some rows (1 in 16 per URL and round)"
    # A fold deletes the cells it summed: a folded row keeps only the cells of later rounds.
    for r in folded:
        assert all(c[2:] > r[FOLDED] for c in r if c.startswith(b"n:"))
    for u in URLS[:10]:
        got = store.get_url(u)
        assert got is not None and got.inlinks == want[u]
    refill = store.pending_many(["blind0.test", "blind1.test"], 100)
    assert {r.url: r.inlinks for recs in refill.values() for r in recs} == {
        u: c for u, c in want.items() if "blind2" not in u
    }


@pytest.mark.parametrize("killed_at", [0.3, 0.7, 1.0])
def test_a_round_run_again_under_its_id_adds_nothing(store: HBaseStore, hbase_thrift: tuple[str, int],
                                                      killed_at: float) -> None:
    store.set_link_round(round_id(0))
    store.add_urls([rec(u) for u in URLS])
    want = {u: 1 for u in URLS}
    for n in range(1, 6):
        found = {u: n for u in URLS}
        # Some URLs fold in this round, some do not: the re-run must agree in both cases.
        assert any(fold_chosen(row_key(u), round_id(n).encode()) for u in URLS)
        run_round(store, n, found, part=killed_at)  # killed here ...
        run_round(store, n, found)  # ... and run again whole under the same id
        for u in URLS:
            want[u] += n
    rows = crawldb(store, hbase_thrift)
    assert {r[b"m:u"].decode(): inlinks_of(r) for r in rows.values()} == want


def test_a_round_id_of_another_form_counts_read_then_put(store: HBaseStore, hbase_thrift: tuple[str, int]) -> None:
    store.set_link_round("jobs.done:/seg/a.jsonl")  # `crawlfleet jobs run` names rounds after segments
    assert not store.blind_inlinks
    store.add_urls([rec(u) for u in URLS[:5]])
    store.raise_inlinks([rec(u, 2) for u in URLS[:5]])
    store.set_link_round("jobs.done:/seg/b.jsonl")
    store.raise_inlinks([rec(u, 3) for u in URLS[:5]])
    store.raise_inlinks([rec(u, 3) for u in URLS[:5]])  # b run again: counted once
    rows = crawldb(store, hbase_thrift)
    assert all(not any(c.startswith(b"n:") for c in r) for r in rows.values())
    assert {r[b"m:u"].decode(): inlinks_of(r) for r in rows.values()} == {u: 1 + 3 for u in URLS[:5]}


def test_a_crawl_db_made_before_family_n_keeps_read_then_put(hbase_thrift: tuple[str, int], hbase_prefix: str) -> None:
    prefix = f"{hbase_prefix}legacy"
    conn = happybase.Connection(*hbase_thrift, table_prefix=prefix)
    conn.create_table("crawldb", {"m": {"max_versions": 1}})  # the layout before f0f182d (no family n)
    conn.close()
    st = HBaseStore(*hbase_thrift, prefix=prefix, batch_size=100, retry_seconds=60)
    try:
        st.set_link_round(round_id(1))
        assert not st.blind_inlinks
        st.add_urls([rec(u) for u in URLS[:5]])
        st.set_link_round(round_id(2))
        st.raise_inlinks([rec(u, 4) for u in URLS[:5]])
        st.raise_inlinks([rec(u, 4) for u in URLS[:5]])  # round 2 run again: counted once
        assert {u: st.get_url(u).inlinks for u in URLS[:5]} == {u: 5 for u in URLS[:5]}  # type: ignore[union-attr]
        assert {r.url: r.inlinks for r in st.pending_many(["blind0.test"], 10)["blind0.test"]} == {
            u: 5 for u in URLS[:5]
        }
    finally:
        st.close()
        drop_prefix(prefix)


def test_the_hot_families_use_the_block_cache_and_bodies_do_not(store: HBaseStore,
                                                                 hbase_thrift: tuple[str, int]) -> None:
    conn = happybase.Connection(*hbase_thrift, table_prefix=store.prefix)
    try:
        cached = {(t, f): d["block_cache_enabled"] for t in ("crawldb", "pending", "pages")
                  for f, d in conn.table(t).families().items()}  # fmt: skip
    finally:
        conn.close()
    assert cached == {("crawldb", b"m"): True, ("crawldb", b"n"): True, ("pending", b"p"): True,
                      ("pages", b"m"): True, ("pages", b"b"): False}  # fmt: skip


def test_a_redirect_targets_hops_survive_the_refill_and_get_paths(store: HBaseStore) -> None:
    """``UrlRecord.redirect_hops`` (a chain spread over tasks, ``fetchers.redirects.target_hops``) is one
    cell, m:j, written only when not 0; both the dispatcher's refill and ``get_url`` read it back, and a
    known URL keeps the hops of its first discovery."""
    target, plain = "http://hops.test/r/3", "http://hops.test/p"
    store.add_urls([UrlRecord(target, fingerprint(target), host_of(target), 2, redirect_hops=4), rec(plain)])
    store.add_urls([UrlRecord(target, fingerprint(target), host_of(target), 2, redirect_hops=1)])
    store.flush()
    refill = {r.url: r.redirect_hops for r in store.pending_many([host_of(target)], 10)[host_of(target)]}
    assert refill == {target: 4, plain: 0}
    assert {r.url: r.redirect_hops for r in store.pending(host_of(target), 10)} == refill
    got = store.get_url(target)
    assert got is not None and got.redirect_hops == 4
