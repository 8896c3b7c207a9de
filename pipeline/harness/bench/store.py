"""``crawlfleet bench store``: pages written/s and crawl-db look-ups/s, HBase vs SQLite, batched vs
single calls, all in the same run; plus the SQLite per-page cost of a simulated crawl loop.

Figures:
- ``write``: ``record_results`` with a page each (``--body-bytes``), in batches of ``--batch`` and one
  page per call ("single puts").
- ``lookup``: ``seen`` over batches of ``--batch`` URLs (half known) and one URL per call.
- ``crawl_loop`` (SQLite): per fetched page, ``record_results`` for it and ``add_urls`` for its
  ``--links`` links (80% on the same host), batches of ``--batch`` pages: CPU us/page of the calling
  thread, the figure the crawler's 2,000 pages/s budget is about.
Ratios: every HBase figure over the SQLite one, every batched figure over the single-call one.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pipeline.observe.machine import machine as _host_machine
from pipeline.storage.base import Outcome, PageRecord, Store, UrlRecord, UrlState
from pipeline.urls import fingerprint, host_of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pages", type=int, default=3000, help="pages written per batched run")
    parser.add_argument("--single-pages", type=int, default=300, help="pages written one call each")
    parser.add_argument("--batch", type=int, default=100, help="URLs or pages per call when batched")
    parser.add_argument("--body-bytes", type=int, default=20_000, help="bytes of each synthetic page body")
    parser.add_argument("--links", type=int, default=50, help="links per page in the crawl loop")
    parser.add_argument("--hbase", default="127.0.0.1:9090", help="HOST:PORT of the Thrift server, or 'off'")


def _machine() -> dict[str, object]:
    return {**_host_machine(), "loadavg_1m": os.getloadavg()[0]}


def _body(n: int, seed: int) -> bytes:
    rng = random.Random(seed)
    words = [bytes(rng.choices(b"abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(2000)]
    out = bytearray(b"<html><body>")
    while len(out) < n:
        out += b"<p>" + b" ".join(rng.choices(words, k=25)) + b' <a href="/x">x</a></p>\n'
    return bytes(out[:n])


def _recs(urls: list[str]) -> list[UrlRecord]:
    return [UrlRecord(u, fingerprint(u), host_of(u), 1) for u in urls]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _write_and_lookup(store: Store, args: argparse.Namespace, tag: str) -> dict[str, float]:
    body = _body(args.body_bytes, 1)
    urls = [f"http://{tag}{i % 50}.test/p/{i}" for i in range(args.pages + args.single_pages)]
    for i in range(0, len(urls), 500):
        store.add_urls(_recs(urls[i : i + 500]))

    def outcome(u: str) -> Outcome:
        return Outcome(u, fingerprint(u), UrlState.DONE, 200, 1.0,
                       page=PageRecord(u, fingerprint(u), u, 200, "text/html", body, 1.0, {"content-type": "text/html"}))  # fmt: skip

    batched, single = urls[: args.pages], urls[args.pages :]
    t_batch = _timed(lambda: [store.record_results([outcome(u) for u in batched[i : i + args.batch]])
                              for i in range(0, len(batched), args.batch)])  # fmt: skip
    t_single = _timed(lambda: [store.record_results([outcome(u)]) for u in single])
    probes = [u if i % 2 else u.replace("/p/", "/q/") for i, u in enumerate(urls)]  # half unknown
    t_lookup_batch = _timed(lambda: [store.seen(probes[i : i + args.batch]) for i in range(0, len(probes), args.batch)])
    few = probes[: args.single_pages]
    t_lookup_single = _timed(lambda: [store.seen([u]) for u in few])
    return {
        "pages_per_s_batch": len(batched) / t_batch,
        "pages_per_s_single": len(single) / t_single,
        "lookups_per_s_batch": len(probes) / t_lookup_batch,
        "lookups_per_s_single": len(few) / t_lookup_single,
    }


def _crawl_loop(store: Store, args: argparse.Namespace) -> dict[str, float]:
    """A crawl of 100 hosts x 100 pages driven through the store only (no network)."""
    rng = random.Random(7)
    body = _body(args.body_bytes, 2)
    n_hosts, per_host = 100, 100
    store.add_urls(_recs([f"http://s{h}.test/page/0" for h in range(n_hosts)]))
    cpu = {"add": 0.0, "pending": 0.0, "record": 0.0}
    pages, wall = 0, time.perf_counter()
    while True:
        t0 = time.thread_time()
        hosts = store.pending_hosts()
        batch: list[UrlRecord] = []
        for h, _ in hosts:
            batch += store.pending(h, max(1, args.batch // max(1, len(hosts)) + 1))
            if len(batch) >= args.batch:
                break
        t1 = time.thread_time()
        if not batch:
            break
        outs, links = [], []
        for r in batch:
            site = int(r.host[1 : r.host.index(".")])
            outs.append(Outcome(r.url, r.url_id, UrlState.DONE, 200, 1.0,
                                page=PageRecord(r.url, r.url_id, r.url, 200, "text/html", body, 1.0)))  # fmt: skip
            for _ in range(args.links):
                s = site if rng.random() < 0.8 else rng.randrange(n_hosts)
                u = f"http://s{s}.test/page/{rng.randrange(per_host)}"
                links.append(UrlRecord(u, fingerprint(u), host_of(u), r.depth + 1, discovered_from=r.url))
        t2 = time.thread_time()
        store.record_results(outs)
        t3 = time.thread_time()
        store.add_urls(links)
        t4 = time.thread_time()
        store.counts()
        cpu["pending"] += t1 - t0
        cpu["record"] += t3 - t2
        cpu["add"] += t4 - t3 + time.thread_time() - t4
        pages += len(outs)
    wall = time.perf_counter() - wall
    total = sum(cpu.values())
    return {"pages": pages, "links_per_page": args.links, "batch": args.batch,
            "cpu_us_per_page": 1e6 * total / pages,
            **{f"cpu_us_per_page_{k}": 1e6 * v / pages for k, v in cpu.items()},
            "wall_s_incl_simulation": wall}  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, object]:
    from pipeline.storage.sqlite import SqliteStore

    result: dict[str, object] = {"machine": _machine(), "params": {k: v for k, v in vars(args).items() if k != "json"}}
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        sqlite = SqliteStore(Path(tmp) / "a.db")
        try:
            result["sqlite"] = _write_and_lookup(sqlite, args, "w")
        finally:
            sqlite.close()
        loop = SqliteStore(Path(tmp) / "loop.db")
        try:
            result["crawl_loop_sqlite"] = _crawl_loop(loop, args)
        finally:
            loop.close()
    if args.hbase != "off":
        from pipeline.storage.hbase import HBaseStore

        host, _, port = args.hbase.partition(":")
        hbase = HBaseStore(host, int(port or 9090), prefix=f"bench{uuid.uuid4().hex[:8]}", batch_size=200)
        try:
            result["hbase"] = _write_and_lookup(hbase, args, "w")
        finally:
            hbase.drop()
            hbase.close()
    _ratios(result)
    return result


def _ratios(result: dict[str, object]) -> None:
    ratios: dict[str, float] = {}
    for store in ("sqlite", "hbase"):
        figs = result.get(store)
        if isinstance(figs, dict):
            ratios[f"{store}_write_batch_over_single"] = figs["pages_per_s_batch"] / figs["pages_per_s_single"]
            ratios[f"{store}_lookup_batch_over_single"] = figs["lookups_per_s_batch"] / figs["lookups_per_s_single"]
    sq, hb = result.get("sqlite"), result.get("hbase")
    if isinstance(sq, dict) and isinstance(hb, dict):
        for key in sq:
            ratios[f"hbase_over_sqlite_{key}"] = hb[key] / sq[key]
    result["ratios"] = {k: round(v, 3) for k, v in ratios.items()}
