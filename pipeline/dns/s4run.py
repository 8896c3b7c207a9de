"""S4's experiment, the resolver side: one name stream through five resolvers against one DNS server.

Run by ``crawlfleet bench dns`` in a process of its own, usually inside a private mount namespace
whose ``/etc/resolv.conf`` names the benchmark's DNS server, so that ``getaddrinfo`` (the system
resolver, S4's ``gethostbyname`` baseline) asks it: ``python -m pipeline.dns.s4run JSON`` prints one
JSON object. The modes, each a fresh resolver on the same stream:

==================  ===========================================================================
mode                what runs
==================  ===========================================================================
serial              ``getaddrinfo`` one look-up at a time (S4's baseline), on the first
                    ``serial_cap`` look-ups (its rate is flat: every look-up is one query)
threads             ``getaddrinfo`` in ``concurrency`` threads (the same concurrency as async)
async               c-ares, ``concurrency`` look-ups in flight, no cache (S4's "async alone")
cache               ``getaddrinfo`` one at a time behind the S4 cache (S4's "cache alone")
threads_cache       ``concurrency`` threads behind the S4 cache (for comparison)
async_cache         c-ares behind the S4 cache (S4's "both")
==================  ===========================================================================

``system: false`` replaces ``getaddrinfo`` with :class:`UdpBlockingResolver` (a blocking RFC 1035 query
per call to the given server): for machines where a private resolv.conf cannot be mounted.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import numpy as np

from pipeline.dns.blocking import GetaddrinfoResolver, UdpBlockingResolver
from pipeline.dns.cache_resolver import CachingResolver
from pipeline.dns.errors import DnsError
from pipeline.dns.resolver import AresResolver
from pipeline.settings import DnsSettings


def zipf_stream(
    lookups: int, names: int, *, exponent: float, seed: int, domain: str = "bench.crawl.test"
) -> list[str]:
    """Every one of ``names`` names once, the rest drawn with p(rank k) ~ 1/k^exponent, shuffled."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, names + 1) ** exponent
    extra = rng.choice(names, max(0, lookups - names), p=weights / weights.sum())
    ranks = np.concatenate([np.arange(names), extra])
    rng.shuffle(ranks)
    return [f"n{k}.{domain}" for k in ranks.tolist()]


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

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - start, errors[0]


async def drive_async(
    fn: Callable[[str], Awaitable[object]], stream: Iterable[str], concurrency: int
) -> tuple[float, int]:
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


def _row(seconds: float, lookups: int, errors: int, **extra: Any) -> dict[str, Any]:
    return {"seconds": round(seconds, 3), "lookups": lookups, "errors": errors,
            "lookups_per_s": round(lookups / seconds, 1), **extra}  # fmt: skip


def run_modes(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run every mode in ``cfg["modes"]`` on the stream ``cfg`` describes; rows by mode."""
    stream = zipf_stream(cfg["lookups"], cfg["names"], exponent=cfg["zipf"], seed=cfg["seed"])
    server, conc, timeout_s, tries = cfg["server"], cfg["concurrency"], cfg["timeout_s"], cfg["tries"]
    settings = DnsSettings(servers=(server,), timeout_s=timeout_s, tries=tries, cache_size=cfg["cache_size"],
                           refresh_period_s=cfg["refresh_s"], max_inflight=conc)  # fmt: skip

    def blocking(threads: int) -> Any:
        if cfg["system"]:
            return GetaddrinfoResolver(threads=threads)
        return UdpBlockingResolver(server, timeout_s=timeout_s, tries=tries, threads=threads)

    async def cached(upstream: Any, workers: int) -> dict[str, Any]:
        r = CachingResolver.from_settings(settings, upstream=upstream)
        secs, errs = await drive_async(r.resolve, stream, workers)
        s = r.stats()
        await r.aclose()
        return _row(secs, len(stream), errs, queries_sent=s.queries_sent, hits=s.hits,
                    inflight_joins=s.inflight_joins, evictions=s.evictions)  # fmt: skip

    async def ares() -> dict[str, Any]:
        r = AresResolver((server,), timeout_s=timeout_s, tries=tries, max_inflight=conc)
        secs, errs = await drive_async(r.query, stream, conc)
        await r.aclose()
        return _row(secs, len(stream), errs, queries_sent=r.queries_sent)

    out: dict[str, Any] = {}
    for mode in cfg["modes"]:
        cpu0 = time.process_time()  # every thread of this process: what each way costs in CPU
        _run_mode(mode, out, stream, cfg, blocking, cached, ares)
        out[mode]["cpu_s"] = round(time.process_time() - cpu0, 3)
    return out


def _run_mode(mode: str, out: dict[str, Any], stream: list[str], cfg: dict[str, Any], blocking: Any, cached: Any,
              ares: Any) -> None:  # fmt: skip
    conc = cfg["concurrency"]
    if mode == "serial":
        sample = stream[: cfg["serial_cap"]] if cfg["serial_cap"] else stream
        secs, errs = drive_threads(blocking(1).query_sync, sample, 1)
        out[mode] = _row(secs, len(sample), errs, sampled=len(sample) < len(stream))
    elif mode == "threads":
        secs, errs = drive_threads(blocking(conc).query_sync, stream, conc)
        out[mode] = _row(secs, len(stream), errs, queries_sent=len(stream))
    elif mode == "async":
        out[mode] = asyncio.run(ares())
    elif mode == "cache":
        out[mode] = asyncio.run(cached(blocking(1), 1))
    elif mode == "threads_cache":
        out[mode] = asyncio.run(cached(blocking(conc), conc))
    elif mode == "async_cache":
        out[mode] = asyncio.run(cached(None, conc))
    else:
        raise ValueError(f"unknown mode {mode!r}")


def main() -> None:
    print(json.dumps(run_modes(json.loads(sys.argv[1]))))


if __name__ == "__main__":
    main()
