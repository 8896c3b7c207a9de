"""``crawlfleet bench s1 --json``: S1's flat rate under a quota, measured at the web server.

A real fleet crawl of the testbed (``--workers`` Celery fetch nodes, the dispatcher, ``crawlfleet
links``, SQLite store, a private vhost of the broker at ``--broker``) runs for ``--duration-s`` under a
quota of ``--per-s`` URLs/s, and again for the same time with no quota file (the baseline, same web,
fresh crawl). The figures come from the **testbed's access log**, never from the crawler: the URLs it
was asked for per wall second (robots.txt, redirect hops and the fetcher's own 5xx retries left out,
as S1 grants URLs, not requests). Each crawl starts at the top of a minute; steady state drops the
first ``--warmup-s`` (default: the first minute, whose unused seconds while the crawl starts up carry
over into bursts, as S1 allows) and the last 2 seconds. Every second is kept in ``per_second``.

Reported per run: per-second mean, standard deviation and coefficient of variation (CV, S1's claim is
a flat line; the goal is CV <= 10%), the largest second, the largest minute against floor(60*m), and
the seconds where the minute's running total broke S1's bound floor(s*m) (must be 0). A PNG of both
per-second lines goes to ``--plot`` (default docs/bench/s1.png).
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.harness.bench.amqp import private_vhost
from pipeline.harness.bench.jobs import machine
from pipeline.harness.faults.accounting import url_key
from pipeline.harness.faults.bed import Bed
from pipeline.harness.faults.fleet import FleetRig
from pipeline.harness.faults.quota_trial import granted_requests


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--per-s", type=float, default=200.0, help="the quota: URLs per second for the crawl's service")
    p.add_argument("--duration-s", type=float, default=180.0, help="wall seconds each crawl runs")
    p.add_argument("--warmup-s", type=float, default=60.0,
                   help="seconds left out of the steady state at the start (default: the crawl's first minute, "
                        "when S1's carry-over and the link jobs' first rounds make bursts)")
    p.add_argument("--hosts", type=int, default=300, help="testbed hosts")
    p.add_argument("--pages", type=int, default=200, help="testbed pages per host")
    p.add_argument("--seed", type=int, default=19, help="seed of the testbed's random web")
    p.add_argument("--workers", type=int, default=2, help="fetch nodes")
    p.add_argument("--slots", type=int, default=8, help="virtual fetchers per node")
    p.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672", help="broker URL without vhost")
    p.add_argument("--plot", type=Path, default=Path("docs/bench/s1.png"), help="PNG of both per-second lines")
    p.add_argument("--skip-baseline", action="store_true", help="run the quota crawl only")


def per_second(entries: list[dict[str, Any]], start: float, end: float) -> list[int]:
    """Counts per wall second from ``start`` (floored) to ``end``, zeros included."""
    c = Counter(int(float(e["t"])) for e in entries)
    return [c.get(s, 0) for s in range(int(start), int(end) + 1)]


def s1_bound_breaks(entries: list[dict[str, Any]], per_s: float) -> list[int]:
    """Wall seconds where the URLs asked for so far in that minute exceed floor(s*m) (S1 rule 2)."""
    c = Counter(int(float(e["t"])) for e in entries)
    breaks, running, minute = [], 0, None
    for sec in sorted(c):
        if sec // 60 != minute:
            minute, running = sec // 60, 0
        running += c[sec]
        if running > math.floor((sec % 60 + 1) * per_s + 1e-9):
            breaks.append(sec)
    return breaks


def flatness(counts: list[int]) -> dict[str, float]:
    mean = statistics.fmean(counts) if counts else 0.0
    sd = statistics.pstdev(counts) if len(counts) > 1 else 0.0
    return {"seconds": len(counts), "mean": round(mean, 2), "stdev": round(sd, 2),
            "cv": round(sd / mean, 4) if mean else 0.0, "max": max(counts, default=0), "min": min(counts, default=0)}  # fmt: skip


def _crawl(bed: Bed, broker: str, workdir: Path, args: argparse.Namespace, *, quota: bool) -> dict[str, Any]:
    quotas = workdir / "quotas.toml"
    workdir.mkdir(parents=True, exist_ok=True)
    env = {"CRAWLFLEET_DISPATCH_QUOTAS_FILE": str(quotas) if quota else ""}
    rig = FleetRig(bed, broker, workdir, slots=args.slots, extra_env=env, log_level="WARNING", heartbeat_s=1.0,
                   lease_s=60.0)  # fmt: skip
    quotas.write_text(f"[services]\n{rig.service} = {args.per_s}\n")
    try:
        for i in range(1, args.workers + 1):
            rig.start_worker(i)
        # S1 carries unused seconds over within the minute: a crawl started at second 40 may take 40*m at
        # once. Start at the top of a minute so the warm-up holds that one-off, not the steady state.
        time.sleep(max(0.0, 60.0 - time.time() % 60.0))
        start = time.time()
        rig.start_dispatcher()
        time.sleep(args.duration_s)
        end = time.time()
    finally:
        rig.close()
    bed.settle()
    hops = {url_key(u) for u in bed.truth.get("redirect_hops", ())}
    asked = granted_requests(bed.window(start, end), hops)
    first = min((float(e["t"]) for e in asked), default=start)
    counts = per_second(asked, first, end)
    steady = counts[int(args.warmup_s) : max(int(args.warmup_s), len(counts) - 2)]
    minutes = Counter(int(float(e["t"])) // 60 for e in asked)
    return {"quota_per_s": args.per_s if quota else None, "urls": len(asked), "wall_s": round(end - start, 1),
            "steady": flatness(steady), "per_second": counts,
            "max_minute": max(minutes.values(), default=0),
            "s1_bound_breaks": len(s1_bound_breaks(asked, args.per_s)) if quota else None}  # fmt: skip


def serial_check_cost(broker: str, *, checks: int = 500) -> dict[str, Any]:
    """S1's serial-id check as a node pays it per batch: one round trip to the dispatcher's responder
    (a real responder thread answering from a table of 64 outstanding batches), on this broker."""
    from pipeline.transport.wire.serialcheck import HELD, SerialChecker, SerialResponder, SerialTable

    table = SerialTable()
    table.replace((serial, f"n#{serial % 8}") for serial in range(1, 65))
    responder = SerialResponder(broker, "bench-s1-check", table).start()
    checker = SerialChecker(broker, timeout_s=5.0)
    times: list[float] = []
    try:
        responder.ready.wait(30)
        checker.check("bench-s1-check", 1, "n#1")  # connect outside the timing
        for i in range(checks):
            serial = 1 + i % 64
            t0 = time.perf_counter()
            verdict = checker.check("bench-s1-check", serial, f"n#{serial % 8}")
            times.append(time.perf_counter() - t0)
            if verdict != HELD:
                raise RuntimeError(f"serial check answered {verdict} for a held batch")
    finally:
        responder.stop()
        checker.close()
    times.sort()
    return {"checks": checks, "mean_ms": round(1000 * statistics.fmean(times), 3),
            "p50_ms": round(1000 * times[len(times) // 2], 3), "p99_ms": round(1000 * times[int(len(times) * 0.99)], 3)}  # fmt: skip


def _plot(path: Path, runs: dict[str, dict[str, Any]], per_s: float) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    for name, run in runs.items():
        ax.plot(run["per_second"], label=f"{name} (steady CV {run['steady']['cv']:.3f})", linewidth=1)
    ax.axhline(per_s, color="grey", linestyle="--", linewidth=0.8, label=f"quota {per_s:g}/s")
    ax.set_xlabel("second of the crawl")
    ax.set_ylabel("URLs requested at the testbed per second")
    ax.set_title("S1: a fleet crawl with and without a quota (testbed access log)")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return str(path)


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cf-bench-s1-") as tmp, private_vhost(args.broker) as broker:
        bed = Bed.start(args.hosts, args.pages, seed=args.seed, workdir=Path(tmp) / "tb")
        try:
            runs = {"quota": _crawl(bed, broker, Path(tmp) / "quota", args, quota=True)}
            if not args.skip_baseline:
                # The same web again: a fresh crawl (service, out dir); the testbed serves each URL anew.
                runs["no quota"] = _crawl(bed, broker, Path(tmp) / "free", args, quota=False)
            check = serial_check_cost(broker)
        finally:
            bed.close()
    q = runs["quota"]
    out: dict[str, Any] = {
        "bench": "s1", "machine": machine(), "per_s": args.per_s, "duration_s": args.duration_s,
        "workers": args.workers, "slots": args.slots, "web": {"hosts": args.hosts, "pages": args.pages},
        "runs": runs, "plot": _plot(args.plot, runs, args.per_s), "serial_check": check,
        "goal": {"cv_le_0.10": q["steady"]["cv"] <= 0.10, "no_s1_bound_break": q["s1_bound_breaks"] == 0,
                 "minute_le_60m": q["max_minute"] <= math.floor(60 * args.per_s + 1e-9)},
    }  # fmt: skip
    if "no quota" in runs:
        base = runs["no quota"]["steady"]
        out["cv_ratio_to_no_quota"] = round(q["steady"]["cv"] / base["cv"], 3) if base["cv"] else None
        out["mean_ratio_to_no_quota"] = round(q["steady"]["mean"] / base["mean"], 3) if base["mean"] else None
    return out
