"""``HBaseStore.pending_many`` (the fleet dispatcher's background refills, #18) against a real HBase: the
same URLs, in the same order, as ``pending`` per host, including a stale pending row (its URL already
DONE: skipped and removed) inside a full read, and hosts with nothing pending."""

from __future__ import annotations

import pytest

from pipeline.storage.base import Outcome, UrlRecord, UrlState
from pipeline.storage.hbase import HBaseStore
from pipeline.storage.hbase_cells import pending_key
from pipeline.storage.rowkey import row_key
from pipeline.urls import fingerprint

pytestmark = pytest.mark.integration


def rec(host: str, i: int, depth: int) -> UrlRecord:
    url = f"http://{host}/p{i:02d}"
    return UrlRecord(url, fingerprint(url), host, depth, inlinks=i % 4)


def view(records: list[UrlRecord]) -> list[tuple[str, int, str, int, int]]:
    return [(r.url, r.url_id, r.host, r.depth, r.inlinks) for r in records]


def test_pending_many_reads_what_pending_reads(hbase_thrift: tuple[str, int], hbase_prefix: str) -> None:
    host, port = hbase_thrift
    store = HBaseStore(host, port, prefix=f"{hbase_prefix}rf")
    try:
        hosts = {"a.test": 4, "b.test:8080": 9, "c.test": 0}
        store.add_urls([rec(h, i, i % 3) for h, n in hosts.items() for i in range(n)], count_inlinks=False)
        # b.test's first URL in pending order becomes DONE while its pending row stays (a crash between
        # the state write and the row's delete): it must be skipped, and the read must still fill up.
        first = store.pending("b.test:8080", 1)[0]
        store.record_results([Outcome(first.url, first.url_id, UrlState.DONE, status=200)])
        stale = pending_key(first.host, first.depth, row_key(first.url))
        store._put("pending", [(stale, {b"p:x": b""})])
        limit = 6
        many = store.pending_many(list(hosts), limit)
        assert set(many) == set(hosts)
        assert many["c.test"] == []
        for h in hosts:
            assert view(many[h]) == view(store.pending(h, limit)), h
        assert first.url not in {r.url for r in many["b.test:8080"]}
        assert len(many["b.test:8080"]) == limit and len(many["a.test"]) == 4
        assert all(r.state is UrlState.PENDING for rs in many.values() for r in rs)
    finally:
        store.drop()
        store.close()
