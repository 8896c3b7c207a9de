"""Both scales plan the Poisson policy alike (#23 point 1): the embedded crawl's ``Recrawler`` (per-host
histograms in memory) and the fleet's crawl-db update (``jobs.recrawl.schedule_results``: histograms in the
crawl db, here a real SQLite store, fed in several batches as map tasks would) give every URL the same next
fetch for the same fetch history, with each host's mu solved from its own URLs. Nutch policy too."""

from __future__ import annotations

import collections
import dataclasses
import json
import random
from email.utils import formatdate
from pathlib import Path

import pytest

from fetchers.records import FetchResult
from jobs.recrawl import HOST_META, SIGNAL_PREFIX, read_signals, recrawl_schedule, schedule_results
from pipeline.crawl.revisits import Recrawler
from pipeline.frontier.hostrates import counted, encode_key, key_of
from pipeline.frontier.schedule import RECRAWL_META, Schedule
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Outcome, Revisit, UrlRecord, UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint, host_of

HOSTS = ("a.test", "b.test")
PAGES = 6


def history(seed: int) -> list[FetchResult]:
    """Fetches of 2 hosts x 6 pages over ~2,000 s: each page changes at its own rate, some say when
    (Last-Modified), one result in 15 fails; fetch times strictly increase."""
    rng = random.Random(seed)
    rates = {(h, m): (0.0, 0.002, 0.01, 0.05, 0.2, 0.001)[m] for h in HOSTS for m in range(PAGES)}
    version = dict.fromkeys(rates, 0)
    changed_at = dict.fromkeys(rates, 0.0)
    out, t = [], 1000.0
    for _ in range(160):
        t += rng.uniform(3.0, 20.0)
        h, m = rng.choice(HOSTS), rng.randrange(PAGES)
        if rng.random() < rates[(h, m)] * 15:
            version[(h, m)] += 1
            changed_at[(h, m)] = t - rng.uniform(0.0, 10.0)
        url = f"http://{h}/p{m}"
        if rng.random() < 1 / 15:
            out.append(FetchResult(url, fingerprint(url), 0, final_url=url, status=0, error_class="timeout",
                                   fetched_at=t))  # fmt: skip
            continue
        body = f"<html><body>page {m} version {version[(h, m)]}</body></html>".encode()
        headers = {"last-modified": formatdate(changed_at[(h, m)], usegmt=True)} if m % 2 else {}
        out.append(FetchResult(url, fingerprint(url), 0, final_url=url, status=200, content_type="text/html",
                               body=body, body_bytes=len(body), headers=headers, fetched_at=t))  # fmt: skip
    return out


def embedded(cfg: RecrawlSettings, results: list[FetchResult], tmp: Path) -> dict[str, Revisit]:
    """The embedded crawl's path: the stored state comes back with the pending URL, the outcome carries
    the new one (as CrawlCore does)."""
    rc = Recrawler(cfg, SqliteStore(tmp / "embedded.db"))
    stored: dict[str, Revisit] = {}
    for r in results:
        rc.note_pending([UrlRecord(r.url, r.url_id, host_of(r.url), 0, revisit=stored.get(r.url))])
        state = UrlState.FAILED if r.error_class else UrlState.DONE
        outcome, _ = rc.on_outcome(r, Outcome(r.url, r.url_id, state, r.status, r.fetched_at))
        assert outcome.revisit is not None
        stored[r.url] = outcome.revisit
    return stored


def fleet(cfg: RecrawlSettings, results: list[FetchResult], tmp: Path, *, batch: int) -> dict[str, Revisit]:
    store = SqliteStore(tmp / "fleet.db")
    urls = sorted({r.url for r in results})
    store.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 0) for u in urls])
    store.put_meta(RECRAWL_META, json.dumps(dataclasses.asdict(cfg)))
    for i in range(0, len(results), batch):  # one map task's batch at a time, a fresh schedule each
        schedule = recrawl_schedule(store)
        assert schedule is not None
        schedule_results(store, schedule, results[i : i + batch])
    got = {u: rv for u in urls if (rv := store.get_revisit(u)) is not None}
    store.close()
    return got


@pytest.mark.parametrize(("policy", "budget", "batch"), [("poisson", 0.05, 7), ("poisson", 0.2, 50),
                                                          ("poisson", 0.0, 13), ("nutch", 0.0, 9)])  # fmt: skip
def test_same_history_same_next_fetch_on_both_scales(
    tmp_path: Path, policy: str, budget: float, batch: int
) -> None:
    cfg = RecrawlSettings(enabled=True, policy=policy, initial_interval_s=60.0, min_interval_s=5.0,
                          max_interval_s=3000.0, host_budget_rps=budget, simhash_bits=0)  # fmt: skip
    results = history(seed=7)
    a = embedded(cfg, results, tmp_path)
    b = fleet(cfg, results, tmp_path, batch=batch)
    assert a.keys() == b.keys() and len(a) == len(HOSTS) * PAGES
    for url in a:
        assert b[url] == a[url], url  # every field: next fetch, the estimator's state, validators
    waits = {round(rv.next_fetch - rv.fetched_at, 3) for rv in a.values() if rv.fetches > 3}
    assert len(waits) > 2  # the schedule did tell the pages apart (the test can fail)


def test_fleet_keeps_each_host_histogram_in_the_crawl_db(tmp_path: Path) -> None:
    cfg = RecrawlSettings(enabled=True, policy="poisson", initial_interval_s=60.0, min_interval_s=5.0,
                          max_interval_s=3000.0, host_budget_rps=0.05)  # fmt: skip
    results = history(seed=3)
    fleet(cfg, results, tmp_path, batch=11)
    store = SqliteStore(tmp_path / "fleet.db")
    try:
        for h in HOSTS:
            row = json.loads(store.get_meta(HOST_META + h) or "{}")
            fetched = {r.url for r in results if host_of(r.url) == h and not r.error_class}
            histogram = {k: n for k, n in row["counts"].items() if not k.startswith(SIGNAL_PREFIX)}
            assert sum(histogram.values()) == len(fetched)  # every scheduled URL counted once
            assert any(k.startswith(SIGNAL_PREFIX) for k in row["counts"])  # and what its signals proved
            assert row["mu"] is not None and row["mu"] > 0
        got = read_signals(store, list(HOSTS))
        assert set(got) == set(HOSTS) and all(s.lm_follows + s.lm_strays + s.ignored > 0 for s in got.values())
    finally:
        store.close()


@pytest.mark.parametrize("seed", range(12))
def test_each_host_histogram_counts_every_url_once_under_its_stored_key(tmp_path: Path, seed: int) -> None:
    """The histogram needs no per-URL memory because a URL's bucket is a function of its stored state: so
    after any history each bucket must hold exactly the URLs whose stored state is in it. A failed fetch
    right after a URL's first (exposure 0) once rewrote the exposure to ``initial_interval_s`` without
    moving the URL, and the next fetch counted it a second time (seed 11: 7 URLs in a host of 6)."""
    cfg = RecrawlSettings(enabled=True, policy="poisson", initial_interval_s=60.0, min_interval_s=5.0,
                          max_interval_s=3000.0, host_budget_rps=0.05)  # fmt: skip
    results = history(seed=seed)
    got = fleet(cfg, results, tmp_path, batch=11)
    schedule = Schedule(cfg)
    store = SqliteStore(tmp_path / "fleet.db")
    try:
        for h in HOSTS:
            row = json.loads(store.get_meta(HOST_META + h) or "{}")
            histogram = {k: n for k, n in row["counts"].items() if not k.startswith(SIGNAL_PREFIX) and n}
            stored = [rv for url, rv in got.items() if host_of(url) == h and counted(rv)]
            assert histogram == dict(collections.Counter(encode_key(key_of(rv, schedule)) for rv in stored))
    finally:
        store.close()
