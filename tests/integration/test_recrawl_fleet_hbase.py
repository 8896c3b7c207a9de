"""The fleet's crawl-db update job on real HBase (#23 points 1 and 4), run by the real link pipeline
(mrjob, inline runner) over segments of fetch results:

- sitemap ``lastmod`` feeds the schedule: the living testbed's real sitemaps (a urlset; an index whose
  gzip and plain parts list the pages) fetched over HTTP and put in a segment make the known pages whose
  stored copy is older than their lastmod due at the sitemap's fetch time, and leave the others alone;
- the Poisson policy's per-host estimates live in HBase (meta counters), and the job gives every URL the
  next fetch the embedded crawl gives it for the same history, round after round."""

from __future__ import annotations

import dataclasses
import http.client
import json
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from fetchers.records import FetchResult
from jobs.recrawl import SIGNAL_PREFIX
from jobs.runner import JobArgs, LinkPipeline
from jobs.runnerconfig import RunnerConfig
from pipeline.frontier.schedule import RECRAWL_META
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.model import ip_for_host
from pipeline.links.sitemaps import parse_sitemap
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage import hbase_revisits
from pipeline.storage.base import Outcome, Revisit, UrlRecord, UrlState
from pipeline.storage.hbase import HBaseStore
from pipeline.urls import fingerprint, host_of
from tests.unit.test_recrawl_scales import HOSTS, PAGES, embedded, history

pytestmark = pytest.mark.integration


def _store(hbase_thrift: tuple[str, int], prefix: str) -> HBaseStore:
    return HBaseStore(hbase_thrift[0], hbase_thrift[1], prefix=prefix)


def _round(tmp: Path, spec: str, results: list[FetchResult], n: int) -> None:
    segment = tmp / f"segment-{n:05d}.jsonl"
    segment.write_text("".join(json.dumps(r.to_json()) + "\n" for r in results))
    cfg = RunnerConfig(runner="inline", work_dir=tmp / "work")
    LinkPipeline(cfg, JobArgs(store=spec), carry_cache=False).process(segment)


def _fetch(tb: TestbedProcess, url: str) -> FetchResult:
    parts = urlsplit(url)
    i = int((parts.hostname or "").split(".")[0].removeprefix("site"))
    conn = http.client.HTTPConnection(ip_for_host(i, tb.hosts), tb.port, timeout=10)
    try:
        conn.request("GET", parts.path, headers={"Host": parts.netloc})
        resp = conn.getresponse()
        body = resp.read()
        ctype = resp.getheader("Content-Type", "")
        status = resp.status
    finally:
        conn.close()
    return FetchResult(url, fingerprint(url), 1, final_url=url, status=status, content_type=ctype, body=body,
                       body_bytes=len(body), fetched_at=time.time())  # fmt: skip


def _locs(result: FetchResult) -> list[tuple[str, float]]:
    parsed = parse_sitemap(result.body, url=result.url, in_scope=lambda _: True)
    return [(e.loc, e.lastmod) for e in parsed.entries if e.lastmod is not None]


def test_sitemap_lastmod_makes_older_copies_due(
    hbase_thrift: tuple[str, int], hbase_prefix: str, tmp_path: Path
) -> None:
    prefix = f"{hbase_prefix}lm{uuid.uuid4().hex[:4]}"
    with TestbedProcess(2, 8, seed=7, mutate=True, mutate_rate=600.0, hostile_sitemaps=False,
                        workdir=tmp_path / "tb") as tb:  # fmt: skip
        time.sleep(1.5)  # some pages change, so that lastmods differ from the epoch
        index = _fetch(tb, tb.url(1, "/sitemap_index.xml"))
        children = [e.loc for e in parse_sitemap(index.body, url=index.url, in_scope=lambda _: True).sitemaps]
        files = [_fetch(tb, tb.url(0, "/sitemap.xml")), index, *(_fetch(tb, u) for u in children)]
    assert all(f.status == 200 for f in files) and len(children) == 2
    entries = [e for f in files for e in _locs(f)]
    assert len({host_of(u) for u, _ in entries}) == 2 and len(entries) >= 8
    store = _store(hbase_thrift, prefix)
    try:
        cfg = RecrawlSettings(enabled=True, initial_interval_s=60.0, min_interval_s=5.0, max_interval_s=600.0)
        store.put_meta(RECRAWL_META, json.dumps(dataclasses.asdict(cfg)))
        store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 1) for u, _ in entries])
        store.record_results([Outcome(u, fingerprint(u), UrlState.DONE, 200, 1.0) for u, _ in entries])
        far = time.time() + 1e6
        older = {u: lm for k, (u, lm) in enumerate(entries) if k % 2 == 0}  # copy fetched before the lastmod
        newer = {u: lm for k, (u, lm) in enumerate(entries) if k % 2 == 1}  # copy fetched after it
        store.put_revisits([(u, Revisit(far, 60.0, fetches=1, fetched_at=lm - 5.0)) for u, lm in older.items()]
                           + [(u, Revisit(far, 60.0, fetches=1, fetched_at=lm + 5.0)) for u, lm in newer.items()])  # fmt: skip
        store.flush()
        _round(tmp_path, f"hbase://{hbase_thrift[0]}:{hbase_thrift[1]}/{prefix}", files, 1)
        fetched_at = {u: f.fetched_at for f in files for u, _ in _locs(f)}
        for u in older:
            got = store.get_revisit(u)
            assert got is not None and got.next_fetch == pytest.approx(fetched_at[u]), u
        for u in newer:
            got = store.get_revisit(u)
            assert got is not None and got.next_fetch == far, u
        assert sum(store.requeue_due(time.time() + 1, 1000).values()) == len(older)
    finally:
        store.drop()
        store.close()


def test_poisson_estimates_live_in_hbase_and_match_the_embedded_crawl(
    hbase_thrift: tuple[str, int], hbase_prefix: str, tmp_path: Path
) -> None:
    prefix = f"{hbase_prefix}hr{uuid.uuid4().hex[:4]}"
    cfg = RecrawlSettings(enabled=True, policy="poisson", initial_interval_s=60.0, min_interval_s=5.0,
                          max_interval_s=3000.0, host_budget_rps=0.05, simhash_bits=0)  # fmt: skip
    results = history(seed=11)
    expect = embedded(cfg, results, tmp_path)
    store = _store(hbase_thrift, prefix)
    try:
        urls = sorted({r.url for r in results})
        store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 0) for u in urls])
        store.put_meta(RECRAWL_META, json.dumps(dataclasses.asdict(cfg)))
        store.flush()
        spec = f"hbase://{hbase_thrift[0]}:{hbase_thrift[1]}/{prefix}"
        for n, start in enumerate(range(0, len(results), 40)):  # four rounds, one segment each
            _round(tmp_path, spec, results[start : start + 40], n)
        got = {u: store.get_revisit(u) for u in urls}
        assert got == expect
        rows = hbase_revisits.get_host_rates(store, list(HOSTS))
        for h in HOSTS:
            counts, mu, _, _ = rows[h]
            # the histogram's buckets hold every page once; the host's change-signal counters sit beside them
            buckets = {k: n for k, n in counts.items() if not k.startswith(SIGNAL_PREFIX)}
            assert sum(buckets.values()) == PAGES and mu is not None and mu > 0, sorted(counts.items())
            assert any(k.startswith(SIGNAL_PREFIX) for k in counts)
    finally:
        store.drop()
        store.close()
