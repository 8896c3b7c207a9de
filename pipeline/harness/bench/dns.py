"""``crawlfleet bench dns``: S4's resolver experiment (one table, one run) and S2's figures at scale.

S4 (``--parts s4``). A DNS server for ``*.bench.crawl.test`` runs in a process of its own (the testbed's
zone, :mod:`pipeline.harness.testbed.dns_server`) with ``--latency-ms`` times a log-normal factor
(``--jitter``) added to every answer and ``--loss`` of the queries dropped. When this process may
(root, ``unshare``), the server listens on 127.0.53.1:53 and the resolvers run in a child inside a
private mount namespace whose ``/etc/resolv.conf`` names it (``options timeout:T attempts:N``, the
same timeout and tries c-ares gets), so the baseline is the real system resolver, ``getaddrinfo``.
Otherwise a blocking RFC 1035 query per call stands in (``system_resolver: false`` in the output).
The stream is Zipf over ``--names`` names with every name at least once; its repeat rate
(look-ups / distinct names) bounds what any cache can gain and is printed. The modes are described
in :mod:`pipeline.dns.s4run`; every rate is also a ratio to ``serial`` from the same run.

S2 (``--parts mem``). Both positive caches (IPv4 and IPv6, as the resolver keeps them) filled with
``--mem-entries`` names in a realistic mix (``--v6-fraction`` of them with IPv6 addresses, ``--multi-fraction``
of the IPv4 names with 2-4 addresses, TLDs skewed as a crawl's: half .com). Bytes per entry by RSS beside
the size computed from the arrays and the extra-address dict; S2's prefix count (names under .com)
timed against a full pass over the keys, and checked exact. Then the negative cache at S2's scale
(rbloom's size for ``--neg-names`` at ``--neg-fp``) and key collisions on real-looking names.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from pipeline.dns.keys import name_key, prefix_range
from pipeline.dns.namegen import real_looking_names
from pipeline.dns.negative import NegativeCache
from pipeline.dns.positive import PositiveCache
from pipeline.dns.tld import tld_code
from pipeline.observe.machine import machine as _host_machine

S4_MODES = ("serial", "threads", "async", "cache", "threads_cache", "async_cache")
PAPER = {"cache": "2-3x", "async": "1.5x", "async_cache": "3-5x"}
SYSTEM_DNS = ("127.0.53.1", 53)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parts", default="s4,mem", help="comma list of s4, mem")
    parser.add_argument("--lookups", type=int, default=2_000, help="look-ups in the stream")
    parser.add_argument("--names", type=int, default=800, help="distinct names in the stream")
    parser.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of the repeats")
    parser.add_argument(
        "--latency-ms", type=float, default=30.0, help="median delay added to every DNS answer"
    )
    parser.add_argument("--jitter", type=float, default=0.8, help="sigma of the log-normal delay factor")
    parser.add_argument("--loss", type=float, default=0.02, help="fraction of queries the server drops")
    parser.add_argument("--timeout-s", type=float, default=1.0, help="per-try timeout of every resolver")
    parser.add_argument("--tries", type=int, default=3, help="tries per name of every resolver")
    parser.add_argument(
        "--concurrency", type=int, default=1024, help="async in flight and threads (S4 send queue)"
    )
    parser.add_argument("--cache-size", type=int, default=50_000, help="S4 cache size")
    parser.add_argument("--refresh-s", type=int, default=1800, help="S4 refresh period")
    parser.add_argument("--serial-lookups", type=int, default=300, help="look-ups the serial baseline runs")
    parser.add_argument("--modes", default=",".join(S4_MODES), help="comma list of S4 modes to run")
    parser.add_argument(
        "--no-system-resolver", action="store_true", help="blocking UDP instead of getaddrinfo"
    )
    parser.add_argument("--mem-entries", type=int, default=1_000_000, help="positive entries (S2: 10000000)")
    parser.add_argument("--v6-fraction", type=float, default=0.05, help="names with IPv6 addresses")
    parser.add_argument("--multi-fraction", type=float, default=0.10, help="IPv4 names with 2-4 addresses")
    parser.add_argument(
        "--neg-names", type=int, default=100_000_000, help="negative cache capacity (S2: 1e8)"
    )
    parser.add_argument("--neg-fp", type=float, default=1e-6, help="negative cache false-positive rate")
    parser.add_argument("--collision-names", type=int, default=200_000, help="real-looking names keyed")
    parser.add_argument("--seed", type=int, default=1, help="seed of the stream and the key mix")


def machine() -> dict[str, Any]:
    return {**_host_machine(), "loadavg_1m_at_start": round(os.getloadavg()[0], 2)}


# -- S4 ------------------------------------------------------------------------------------------
def _can_namespace() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(SYSTEM_DNS)
        except OSError:
            return False
    return True


def _start_server(host: str, port: int, args: argparse.Namespace) -> tuple[subprocess.Popen[str], int]:
    cmd = [sys.executable, "-m", "pipeline.harness.testbed.dns_server", host, str(port), str(args.latency_ms),
           str(args.jitter), str(args.loss)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if len(line) != 2 or line[0] != "ready":
        proc.kill()
        raise RuntimeError(f"the benchmark's DNS server did not start: {line}")
    return proc, int(line[1])


def run_s4(args: argparse.Namespace) -> dict[str, Any]:
    system = not args.no_system_resolver and _can_namespace()
    host, port = SYSTEM_DNS if system else ("127.0.0.1", 0)
    proc, port = _start_server(host, port, args)
    cfg = {"server": f"{host}:{port}", "lookups": args.lookups, "names": args.names, "zipf": args.zipf,
           "seed": args.seed, "concurrency": args.concurrency, "timeout_s": args.timeout_s, "tries": args.tries,
           "cache_size": args.cache_size, "refresh_s": args.refresh_s, "serial_cap": args.serial_lookups,
           "system": system, "modes": [m for m in args.modes.split(",") if m]}  # fmt: skip
    child = [sys.executable, "-m", "pipeline.dns.s4run", json.dumps(cfg)]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-dns-") as tmp:
            if system:
                resolv = Path(tmp) / "resolv.conf"
                resolv.write_text(f"nameserver {host}\noptions timeout:{max(1, round(args.timeout_s))} "
                                  f"attempts:{args.tries}\n")  # fmt: skip
                script = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'
                child = ["unshare", "-m", "sh", "-c", script, str(resolv), *child]
            done = subprocess.run(child, capture_output=True, text=True, check=False)
    finally:
        proc.terminate()
        proc.wait(10)
    if done.returncode != 0:
        raise RuntimeError(f"the S4 run failed: {done.stderr[-2000:]}")
    rows: dict[str, Any] = json.loads(done.stdout)
    return s4_table(rows, cfg, args)


def s4_table(rows: dict[str, Any], cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The S4 result: settings, rows with ratios to ``serial``, the paper's claims beside them."""
    out: dict[str, Any] = {
        "settings": {
            k: cfg[k]
            for k in (
                "lookups",
                "names",
                "zipf",
                "concurrency",
                "timeout_s",
                "tries",
                "cache_size",
                "refresh_s",
            )
        },  # fmt: skip
        "server": {"latency_ms_median": args.latency_ms, "jitter_sigma": args.jitter, "loss": args.loss},
        "system_resolver": cfg["system"],
        "stream_repeat_rate": round(cfg["lookups"] / cfg["names"], 2),
        "rows": rows,
    }
    base = rows.get("serial", {}).get("lookups_per_s")
    if base:
        out["ratio_vs_serial"] = {m: round(r["lookups_per_s"] / base, 2) for m, r in rows.items()}
    if "threads" in rows and "async" in rows:
        out["async_vs_threads_same_concurrency"] = round(
            rows["async"]["lookups_per_s"] / rows["threads"]["lookups_per_s"], 2
        )
    out["paper_vs_serial"] = PAPER
    return out


# -- S2 at scale ---------------------------------------------------------------------------------
_TLD_MIX = ["com"] * 50 + ["net"] * 7 + ["org"] * 7 + ["de"] * 5 + ["uk"] * 3 + ["ru"] * 3 + ["cn"] * 3 + [
    "jp", "fr", "io", "info", "br", "it", "nl", "pl", "au", "in", "es", "ca", "xyz", "top", "eu", "ch", "se",
    "kr", "us", "co", "me", "tv", "cz", "be", "at", "dk",
]  # fmt: skip


def _rss() -> int:
    return int(psutil.Process().memory_info().rss)


def run_mem(args: argparse.Namespace) -> dict[str, Any]:
    n, rng = args.mem_entries, np.random.default_rng(args.seed)
    codes = np.array([tld_code(t) for t in _TLD_MIX], dtype=np.uint64)
    com = tld_code("com")
    n6 = int(n * args.v6_fraction)
    gc.collect()
    rss0 = _rss()
    v4, v6 = PositiveCache(n - n6), PositiveCache(max(1, n6), ipv6=True)
    truth_com = multi = 0
    start = time.perf_counter()
    done = 0
    while done < n:  # keys in chunks: no list of 10^7 keys inflates the RSS figure
        size = min(100_000, n - done)
        tld = codes[rng.integers(0, len(codes), size)]
        low = rng.integers(0, 2**63, size, dtype=np.uint64) * np.uint64(2) + rng.integers(
            0, 2, size, dtype=np.uint64
        )
        extra = rng.random(size)
        count = rng.integers(2, 5, size)
        for j in range(size):
            key = (int(tld[j]) << 64) | int(low[j])
            truth_com += int(tld[j]) == com
            if done + j < n6:
                v6.put(key, ((0x2001_0DB8 << 96) | j,), born_s=0, ttl_min=5)
            elif extra[j] < args.multi_fraction:
                v4.put(key, [0x7F000001 + k for k in range(int(count[j]))], born_s=0, ttl_min=5)
                multi += 1
            else:
                v4.put(key, (0x7F000001 + j,), born_s=0, ttl_min=5)
        done += size
    fill_s = time.perf_counter() - start
    gc.collect()
    rss_raw = _rss() - rss0
    _malloc_trim()
    rss = _rss() - rss0
    extras = sum(sys.getsizeof(k) + sys.getsizeof(v) + 24 for c in (v4, v6) for k, v in c._extra.items())
    extras += sum(sys.getsizeof(c._extra) for c in (v4, v6))
    computed = v4.nbytes() + v6.nbytes() + extras

    lo, hi = prefix_range("com")
    reps = 200
    t0 = time.perf_counter()
    counted = 0
    for _ in range(reps):
        counted = v4.count_range(lo, hi) + v6.count_range(lo, hi)
    range_s = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    scan = 0
    for _ in range(3):  # the pre-#20 way: one comparison per stored key
        scan = sum(_scan_count(c, com) for c in (v4, v6))
    scan_s = (time.perf_counter() - t0) / 3
    sample = v4.keys()[:: max(1, len(v4) // 200_000)]
    random.Random(1).shuffle(sample)
    t0 = time.perf_counter()
    for k in sample:
        v4.get(k)
    get_s = time.perf_counter() - t0
    return {
        "entries": len(v4) + len(v6), "ipv6_entries": len(v6), "multi_address_entries": multi,
        "bytes_per_entry_rss": round(rss / n, 2),
        "bytes_per_entry_rss_before_malloc_trim": round(rss_raw / n, 2), "bytes_per_entry_computed": round(computed / n, 2),
        "bytes_per_ipv4_entry_columns": round(v4.nbytes() / max(1, len(v4)), 2),
        "bytes_per_ipv6_entry_columns": round(v6.nbytes() / max(1, len(v6)), 2),
        "extra_address_bytes_per_multi_entry": round(extras / max(1, multi), 1), "s2_budget_bytes": 24,
        "insert_ops_per_s": round(n / fill_s), "get_ops_per_s": round(len(sample) / get_s),
        "compactions": v4.compactions + v6.compactions,
        "com_count": counted, "com_count_exact": counted == truth_com == scan,
        "com_count_us": round(range_s * 1e6, 1), "com_full_pass_us": round(scan_s * 1e6, 1),
        "range_vs_full_pass_speedup": round(scan_s / range_s, 1),
    }  # fmt: skip


def _scan_count(cache: PositiveCache, code: int) -> int:
    """Names under TLD ``code`` by one comparison per stored key (what a range query avoids)."""
    seg = cache._seg
    live = (seg["tag"] & np.uint16(0x1000)) != 0
    in_tld = (seg["khi"] >> np.uint64(52)) == np.uint64(code)
    lo, hi = code << 64, (code + 1) << 64
    return int(np.count_nonzero(in_tld & live)) + cache._delta.count_range(lo, hi)


def _malloc_trim() -> bool:
    """Give the allocator's free pages back to the OS (glibc), so RSS shows live memory, not free lists."""
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def run_negative(args: argparse.Namespace) -> dict[str, Any]:
    neg = NegativeCache(capacity=args.neg_names, fp_rate=args.neg_fp, ttl_s=3600, clock=time.monotonic)
    small = NegativeCache(capacity=200_000, fp_rate=1e-3, ttl_s=3600, clock=time.monotonic, labels_max=1)
    for i in range(200_000):
        small.add(f"in{i}.test", 2, "nxdomain")
    false_pos = sum(small.get(f"out{i}.test", 2) is not None for i in range(1_000_000))
    return {"capacity": args.neg_names, "fp_rate": args.neg_fp, "size_mib": round(neg.size_bytes() / 2**20, 1),
            "paper_mib": 350, "measured_fp_at_1e-3": false_pos / 1_000_000}  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    result: dict[str, Any] = {"machine": machine()}
    if "s4" in parts:
        result["s4"] = run_s4(args)
    if "mem" in parts:
        result["s2_positive"] = run_mem(args)
        result["s2_negative"] = run_negative(args)
        hosts = real_looking_names(args.collision_names, seed=args.seed)
        result["s2_key_collisions"] = {
            "names": len(hosts),
            "collisions": len(hosts) - len({name_key(x) for x in hosts}),
        }
    result["machine"]["loadavg_1m_at_end"] = round(os.getloadavg()[0], 2)  # the machine is shared
    return result
