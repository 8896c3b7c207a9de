"""``crawlfleet bench dns``: S4's resolver experiment and S2's memory figures.

S4 reproduction: a stream of look-ups over distinct names with Zipf-like repeats (every name at
least once) against the test bed's zone server with ``--latency-ms`` added to every answer.
Four resolvers, each a fresh one on the same stream:

* ``blocking``: one blocking UDP query per look-up in a pool of ``--threads`` threads (Scrapy's
  10). getaddrinfo cannot be pointed at a non-53 port, so this is the stand-in (see
  :mod:`pipeline.dns.blocking`); it blocks one thread per look-up exactly as getaddrinfo does.
* ``blocking_cache``: the same upstream behind our CachingResolver, ``--threads`` workers (S4's
  "cache alone").
* ``async``: c-ares, no cache, ``--concurrency`` look-ups in flight (S4's "async alone").
* ``async_cache``: c-ares behind the CachingResolver (both).

Each is reported as look-ups/s and as a ratio to ``blocking``. ``--blocking-lookups`` caps the
look-ups the blocking baseline runs (its rate is flat: every look-up is one query), for the full
1,000,000-look-up run that would otherwise take half an hour at 20 ms.

S2 memory: bytes per entry of the positive cache filled to ``--mem-entries`` (tracemalloc of the
allocation and RSS delta of allocation + fill) against a plain ``dict[str, tuple]``; the negative
cache's size at ``--neg-names``/``--neg-fp`` (from rbloom's own size, the filter is built), its
insert rate on a sample and a measured false-positive rate on a small filter; look-up ops/s of all
three; key collisions on real-looking names.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import os
import random
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import numpy as np
import psutil

from pipeline.dns.blocking import UdpBlockingResolver
from pipeline.dns.cache_resolver import CachingResolver
from pipeline.dns.errors import DnsError
from pipeline.dns.keys import name_key
from pipeline.dns.namegen import real_looking_names
from pipeline.dns.negative import NegativeCache
from pipeline.dns.positive import PositiveCache
from pipeline.dns.resolver import AresResolver
from pipeline.observe.machine import machine as _host_machine
from pipeline.settings import DnsSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parts", default="s4,mem", help="comma list of s4, mem")
    parser.add_argument("--lookups", type=int, default=6_000, help="stream length (full: 1000000)")
    parser.add_argument("--names", type=int, default=300, help="distinct names (full: 50000)")
    parser.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of the repeats")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="added to every DNS answer")
    parser.add_argument("--threads", type=int, default=10, help="blocking pool size (Scrapy: 10)")
    parser.add_argument("--concurrency", type=int, default=256, help="async look-ups in flight")
    parser.add_argument("--cache-size", type=int, default=50_000, help="positive cache size (S4: 50000)")
    parser.add_argument("--blocking-lookups", type=int, default=0, help="cap for the blocking run (0 = all)")
    parser.add_argument("--mem-entries", type=int, default=1_000_000, help="positive entries (S2: 10000000)")
    parser.add_argument("--dict-entries", type=int, default=1_000_000, help="dict baseline entries")
    parser.add_argument("--neg-names", type=int, default=100_000_000, help="negative cache capacity (S2: 1e8)")
    parser.add_argument("--neg-fp", type=float, default=1e-6, help="negative cache false-positive rate")
    parser.add_argument("--neg-sample", type=int, default=1_000_000, help="names inserted to time inserts")
    parser.add_argument("--collision-names", type=int, default=200_000, help="real-looking names keyed")
    parser.add_argument("--seed", type=int, default=1, help="seed of the testbed's (or the simulation's) random web")


def machine() -> dict[str, Any]:
    return {**_host_machine(), "loadavg_1m_at_start": round(os.getloadavg()[0], 2)}


# -- S4 ------------------------------------------------------------------------------------------


def zipf_stream(lookups: int, names: int, *, exponent: float, seed: int) -> list[str]:
    """Every one of ``names`` names once, the rest drawn with p(rank k) ~ 1/k^exponent, shuffled."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, names + 1) ** exponent
    ranks = np.concatenate([np.arange(names), rng.choice(names, max(0, lookups - names), p=weights / weights.sum())])
    rng.shuffle(ranks)
    return [f"n{k}.bench.crawl.test" for k in ranks.tolist()]


def drive_threads(fn: Callable[[str], object], stream: Iterable[str], threads: int) -> tuple[float, int]:
    """Run ``fn`` over the stream from ``threads`` threads; (seconds, errors)."""
    it = iter(stream)
    lock = threading.Lock()
    errors = [0]

    def worker() -> None:
        while True:
            with lock:
                name = next(it, None)
            if name is None:
                return
            try:
                fn(name)
            except DnsError:
                with lock:
                    errors[0] += 1

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - start, errors[0]


async def drive_async(fn: Callable[[str], Awaitable[object]], stream: Iterable[str], concurrency: int) -> tuple[float, int]:
    """Run ``fn`` over the stream with ``concurrency`` coroutines; (seconds, errors)."""
    it = iter(stream)
    errors = 0

    async def worker() -> None:
        nonlocal errors
        for name in it:
            try:
                await fn(name)
            except DnsError:
                errors += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start, errors


def _row(seconds: float, lookups: int, errors: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"seconds": round(seconds, 3), "lookups": lookups, "errors": errors,
            "lookups_per_s": round(lookups / seconds, 1), **(extra or {})}


def run_s4(args: argparse.Namespace) -> dict[str, Any]:
    from pipeline.harness.testbed.harness import TestbedProcess

    stream = zipf_stream(args.lookups, args.names, exponent=args.zipf, seed=args.seed)
    out: dict[str, Any] = {"lookups": len(stream), "distinct_names": args.names, "zipf": args.zipf,
                           "latency_ms": args.latency_ms, "threads": args.threads,
                           "concurrency": args.concurrency, "cache_size": args.cache_size}
    settings = DnsSettings(timeout_s=1.0, tries=3, cache_size=args.cache_size, max_inflight=args.concurrency)
    with TestbedProcess(1, 1, dns_latency_ms=args.latency_ms) as tb:
        server = tb.dns_server
        settings = dataclasses.replace(settings, servers=(server,))

        blocking_stream = stream[: args.blocking_lookups] if args.blocking_lookups else stream
        udp = UdpBlockingResolver(server, timeout_s=1.0, tries=3, threads=args.threads)
        secs, errs = drive_threads(udp.query_sync, blocking_stream, args.threads)
        out["blocking"] = _row(secs, len(blocking_stream), errs, {"extrapolated": len(blocking_stream) < len(stream)})

        async def with_cache(upstream: Any, workers: int) -> dict[str, Any]:
            r = CachingResolver.from_settings(settings, upstream=upstream)
            secs, errs = await drive_async(r.resolve, stream, workers)
            s = r.stats()
            await r.aclose()
            return _row(secs, len(stream), errs, {"queries_sent": s.queries_sent, "hits": s.hits,
                                                  "inflight_joins": s.inflight_joins, "evictions": s.evictions})

        async def no_cache() -> dict[str, Any]:
            r = AresResolver((server,), timeout_s=1.0, tries=3, max_inflight=args.concurrency)
            secs, errs = await drive_async(r.query, stream, args.concurrency)
            await r.aclose()
            return _row(secs, len(stream), errs, {"queries_sent": r.queries_sent})

        out["blocking_cache"] = asyncio.run(
            with_cache(UdpBlockingResolver(server, timeout_s=1.0, tries=3, threads=args.threads), args.threads))
        out["async"] = asyncio.run(no_cache())
        out["async_cache"] = asyncio.run(with_cache(None, args.concurrency))
    base = out["blocking"]["lookups_per_s"]
    out["ratios_vs_blocking"] = {k: round(out[k]["lookups_per_s"] / base, 2)
                                 for k in ("blocking_cache", "async", "async_cache")}
    out["paper"] = {"blocking_cache": "2-3x", "async": "1.5x", "async_cache": "3-5x", "goal_async_cache": ">= 20x"}
    return out


# -- S2 memory -----------------------------------------------------------------------------------


def _rss() -> int:
    return int(psutil.Process().memory_info().rss)


def _key(i: int) -> int:
    """A distinct, well-spread 76-bit key for every i < 2^64 (odd multiplier: a bijection mod 2^64)."""
    return (((i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) << 12) | (i & 0xFFF)


def run_mem(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    n = args.mem_entries

    # Positive cache: allocation traced, fill measured by RSS (tracing every temporary int would
    # only slow the fill; the arrays are allocated up front and the fill allocates nothing lasting).
    gc.collect()
    rss0 = _rss()
    tracemalloc.start()
    cache = PositiveCache(n)
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    start = time.perf_counter()
    for i in range(n):  # keys computed on the fly: no key list inflates the RSS delta
        cache.put(_key(i), (0x7F000001,), born_s=0, ttl_min=5)
    fill_s = time.perf_counter() - start
    gc.collect()
    rss_delta = _rss() - rss0
    probe = [_key(i) for i in random.Random(1).sample(range(n), min(n, 200_000))]
    start = time.perf_counter()
    for k in probe:
        cache.get(k)
    pos_get_s = time.perf_counter() - start
    out["positive"] = {
        "entries": len(cache), "slots": cache.slots, "bytes_per_entry_tracemalloc": round(traced / n, 2),
        "bytes_per_entry_rss": round(rss_delta / n, 2), "bytes_per_entry_arrays": round(cache.nbytes() / n, 2),
        "insert_ops_per_s": round(n / fill_s), "get_ops_per_s": round(len(probe) / pos_get_s),
        "evictions": cache.evictions,
    }
    del cache, probe
    gc.collect()

    # The plain-dict baseline: name -> (address, expiry), the natural Python cache.
    m = args.dict_entries
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    plain: dict[str, tuple[int, float]] = {}
    for i in range(m):  # the cache owns its name strings, so they are built while tracing
        plain[f"n{i}.bench{i % 977}.example.com"] = (0x7F000001 + i, 1e9 + i)
    dict_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    sample_names = random.Random(2).sample(list(plain), min(m, 200_000))
    start = time.perf_counter()
    for name in sample_names:
        plain.get(name)
    dict_get_s = time.perf_counter() - start
    start = time.perf_counter()
    for name in sample_names:
        name_key(name)
    key_s = time.perf_counter() - start
    out["dict_baseline"] = {"entries": m, "bytes_per_entry_tracemalloc": round(dict_bytes / m, 2),
                            "get_ops_per_s": round(len(sample_names) / dict_get_s),
                            "name_avg_chars": round(sum(map(len, sample_names)) / len(sample_names), 1)}
    out["name_key_ops_per_s"] = round(len(sample_names) / key_s)
    del plain, sample_names
    gc.collect()
    ours = out["positive"]["bytes_per_entry_rss"]
    out["positive_vs_dict_memory_ratio"] = round(ours / out["dict_baseline"]["bytes_per_entry_tracemalloc"], 4)
    out["positive_get_vs_dict_ratio"] = round(out["positive"]["get_ops_per_s"] / out["dict_baseline"]["get_ops_per_s"], 4)

    # Negative cache at S2's scale: rbloom's own size, then inserts and probes on a sample.
    clock = time.monotonic
    neg = NegativeCache(capacity=args.neg_names, fp_rate=args.neg_fp, ttl_s=3600, clock=clock)
    failed = [f"nx{i}.gone.example.net" for i in range(args.neg_sample)]
    start = time.perf_counter()
    for name in failed:
        neg.add(name, 2, "nxdomain")
    add_s = time.perf_counter() - start
    start = time.perf_counter()
    for name in failed[:200_000]:
        neg.get(name, 2)
    get_s = time.perf_counter() - start
    small = NegativeCache(capacity=200_000, fp_rate=1e-3, ttl_s=3600, clock=clock, labels_max=1)
    for i in range(200_000):
        small.add(f"in{i}.test", 2, "nxdomain")
    false_pos = sum(small.get(f"out{i}.test", 2) is not None for i in range(1_000_000))
    out["negative"] = {
        "capacity": args.neg_names, "fp_rate": args.neg_fp, "size_mib": round(neg.size_bytes() / 2**20, 1),
        "goal_mib": 350, "insert_ops_per_s": round(len(failed) / add_s), "get_ops_per_s": round(min(200_000, len(failed)) / get_s),
        "measured_fp_at_1e-3": false_pos / 1_000_000,
    }
    del neg, failed, small
    gc.collect()

    hosts = real_looking_names(args.collision_names, seed=args.seed)
    out["key_collisions"] = {"names": len(hosts), "collisions": len(hosts) - len({name_key(x) for x in hosts})}
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    result: dict[str, Any] = {"machine": machine()}
    if "s4" in parts:
        result["s4"] = run_s4(args)
    if "mem" in parts:
        result["s2_memory"] = run_mem(args)
    # The machine is shared: the load says how much of the 2 cores the run really had.
    result["machine"]["loadavg_1m_at_end"] = round(os.getloadavg()[0], 2)
    return result
