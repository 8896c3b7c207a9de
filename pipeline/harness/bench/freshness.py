"""``crawlfleet bench freshness --json``: how fresh a continuous crawl keeps its collection (#23 point 8).

One living testbed (``freshweb.MixedTestbed``: per-page change classes of ``--mix``, real
ETag/Last-Modified/304, hosts i % 6 == 5 ignore validators) is crawled twice with ``crawl --continuous``
for the same wall time, under the same fetch budget: one connection per host and ``--budget`` requests per
second in all (a host delay of hosts/budget seconds, which politeness never shortens). The baseline
revisits uniformly, every URL every N/budget seconds (N = the web's normal pages: exactly the budget); the
other run uses the adaptive schedule ``--policy`` (``poisson``: estimated change rates and per-host
freshness-optimal intervals; ``nutch``: Nutch's AdaptiveFetchSchedule), same first interval, bounds
``--min-interval``..``--max-interval``, simhash near-duplicates of ``--simhash-bits`` count as unchanged.
Both runs are work-conserving (``recrawl.work_conserving``, unless ``--no-work-conserving``): when
nothing is due, the URLs due soonest are fetched, so both spend the same requests per second.

Mixes (``living.MIXES``): ``measured`` (default) follows published change measurements, with test time
scaled so that the uniform cycle N/budget is ``--cycle-test-s`` (a week); ``classic`` is the first living
web (40 % static, 20 % hourly, 20 % every 5 s, 20 % cosmetic) at ``--rate`` test s per wall s (120).

Freshness (Cho & Garcia-Molina): every ``--sample-every`` seconds after ``--warmup`` seconds, the share of
stored normal pages whose copy holds the live content version, from the testbed's own truth
(``livetruth.page_version``): a copy last confirmed (fetched, 304 or same digest) at wall time f is fresh
at t when the page's version at f is its version at t. Date-only and ad-only changes are no change of
content. The mean over the samples is the figure; the ratio adaptive/uniform the claim (goal >= 1.3).
``oracle`` gives, for the same web and budget, the expected freshness of uniform revisiting and of the
optimal schedule that knows every page's true rate: what any schedule could reach.

Conditional GET (``freshweb.conditional_figures``, from the access log and the truth): of the re-fetches
whose bytes had not changed, the share answered 304 without a body, on the hosts that honour validators
(the goal, >= 80 %) and overall (one host in six ignores validators, so at most ~83 %), and the body bytes
that saved: measured (``wirecost``: after each run, each 304'd URL's real 200 and 304 answers, headers
included, with the crawler's request headers; minus the validators' request bytes), and the old estimate
(304s x the mean body of 200 re-fetches, ``body_bytes_saved_est``). Requests per second are counted from
the access log in the measured window, to show both runs spent the same budget.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pipeline.harness.bench.continuous import ContinuousCrawl
from pipeline.harness.bench.freshweb import MixedTestbed, conditional_figures, oracle
from pipeline.harness.bench.jobs import machine
from pipeline.harness.bench.wirecost import log_url, probe_costs, saved_figures
from pipeline.harness.testbed.livetruth import locate, page_version
from pipeline.harness.testbed.living import CLASSIC, CONTENT_CLASSES, MEASURED, MIXES
from pipeline.harness.testbed.model import Web


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=12, help="testbed hosts")
    p.add_argument("--pages", type=int, default=25, help="normal pages per host (home included)")
    p.add_argument("--seed", type=int, default=23, help="seed of the testbed's random web")
    p.add_argument("--mix", choices=tuple(MIXES), default=MEASURED, help="the living web's change mix")
    p.add_argument(
        "--rate", type=float, default=None,
        help="test seconds per wall second (default: classic 120; measured: --cycle-test-s per uniform cycle)",
    )  # fmt: skip
    p.add_argument(
        "--cycle-test-s", type=float, default=7 * 86400.0,
        help="measured mix: the uniform revisit cycle in test seconds (sets --rate)",
    )  # fmt: skip
    p.add_argument(
        "--policy",
        choices=("nutch", "poisson"),
        default="nutch",
        help="the adaptive run's policy (default: the crawler's default, recrawl.policy)",
    )
    p.add_argument(
        "--no-work-conserving", action="store_true", help="runs fetch only due URLs (budget may go unspent)"
    )
    p.add_argument("--budget", type=float, default=12.0, help="fetch budget, requests per second in all")
    p.add_argument(
        "--seconds", type=float, default=60.0, help="measured wall seconds per run (after --warmup)"
    )
    p.add_argument("--warmup", type=float, default=30.0, help="wall seconds before sampling starts")
    p.add_argument("--sample-every", type=float, default=2.0, help="seconds between freshness samples")
    p.add_argument("--min-interval", type=float, default=4.0, help="adaptive: shortest revisit interval, s")
    p.add_argument("--max-interval", type=float, default=600.0, help="adaptive: longest revisit interval, s")
    p.add_argument(
        "--simhash-bits", type=int, default=3, help="adaptive: near-duplicate distance (0 = digest only)"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    n_pages = args.hosts * args.pages
    uniform_s = n_pages / args.budget
    rate = args.rate or (120.0 if args.mix == CLASSIC else args.cycle_test_s / uniform_s)
    with tempfile.TemporaryDirectory(prefix="bench-freshness-") as tmp:
        work = Path(tmp)
        tb = MixedTestbed(
            args.hosts,
            args.pages,
            mix=args.mix,
            seed=args.seed,
            mutate_rate=rate,
            workdir=work / "testbed",
            hostile_sitemaps=False,
        )
        with tb:
            web = Web(args.hosts, args.pages, seed=args.seed, port=tb.port, living=tb.living)
            runs = {}
            for mode in ("uniform", "adaptive"):
                runs[mode] = _run_mode(tb, web, mode, args, work / mode, uniform_s=uniform_s)
    u, a = runs["uniform"], runs["adaptive"]
    low, high = min(args.min_interval, uniform_s), max(args.max_interval, uniform_s)
    return {
        "bench": "freshness",
        "machine": machine(),
        "web": {
            "hosts": args.hosts,
            "pages": n_pages,
            "mix": args.mix,
            "rate": round(rate, 3),
            "seed": args.seed,
        },
        "budget_req_per_s": args.budget,
        "uniform_interval_s": round(uniform_s, 2),
        "policy": args.policy,
        "work_conserving": not args.no_work_conserving,
        "warmup_s": args.warmup,
        "measured_s": args.seconds,
        "uniform": u,
        "adaptive": a,
        "freshness_ratio": _ratio(a["mean_freshness"], u["mean_freshness"]),
        "freshness_ratio_changing_pages": _ratio(
            a["mean_freshness_changing_pages"], u["mean_freshness_changing_pages"]
        ),
        "oracle": oracle(web, host_budget_rps=args.budget / args.hosts, low=low, high=high),
        "goal_ratio": 1.3,
        "goal_304_share": 0.8,
    }


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def _config(mode: str, args: argparse.Namespace, *, uniform_s: float) -> str:
    adaptive = mode == "adaptive"
    lines = [
        "[politeness]", "per_host_concurrency = 1", f"min_host_delay_s = {args.hosts / args.budget!r}",
        "[recrawl]", f"adaptive = {str(adaptive).lower()}", f"initial_interval_s = {uniform_s!r}",
        f'policy = "{args.policy}"', f"work_conserving = {str(not args.no_work_conserving).lower()}",
        f"min_interval_s = {min(args.min_interval, uniform_s) if adaptive else uniform_s!r}",
        f"max_interval_s = {max(args.max_interval, uniform_s) if adaptive else uniform_s!r}",
        f"simhash_bits = {args.simhash_bits if adaptive else 0}", "check_interval_s = 0.5",
        f"failed_interval_s = {uniform_s!r}", "requeue_batch = 200",
        "sitemaps = false",  # revisiting is measured here, not discovery (the hostile host's 50k sitemap URLs)
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def _run_mode(
    tb: MixedTestbed, web: Web, mode: str, args: argparse.Namespace, out: Path, *, uniform_s: float
) -> dict[str, Any]:
    out.mkdir(parents=True)
    cfg, stop = out / "crawl.toml", out / "stop"
    cfg.write_text(_config(mode, args, uniform_s=uniform_s))
    cmd = [
        sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out / "crawl"),
        "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24", "--max-depth", "50",
        "--json", "--no-progress", "--config", str(cfg), "--continuous", "--stop-file", str(stop),
    ]  # fmt: skip
    started = time.time()
    samples: list[float] = []
    changing: list[float] = []  # the same, among pages whose content changes (hourly and fast classes)
    stored: list[int] = []
    with ContinuousCrawl(cmd, stop) as crawl:
        measure_from = started + args.warmup
        end = measure_from + args.seconds
        while time.time() < end:
            time.sleep(args.sample_every)
            if not crawl.running():
                raise RuntimeError(f"{mode} crawl ended early: {crawl.stderr_tail(2000)}")
            now = time.time()
            if now < measure_from:
                continue
            got = freshness_at(web, out / "crawl" / "crawl.db", now, test_time=tb.test_time)
            if got["stored"]:
                samples.append(got["fresh"] / got["stored"])
                stored.append(got["stored"])
            if got["changing"]:
                changing.append(got["fresh_changing"] / got["changing"])
        code, stdout, stderr = crawl.stop(timeout_s=120)
    if code != 0:
        raise RuntimeError(f"{mode} crawl failed ({code}): {stderr[-2000:]}")
    summary = json.loads(stdout.strip().splitlines()[-1])
    rc = summary.get("recrawl", {})
    tb.wait_log_flush()
    log = [e for e in tb.read_access_log() if float(e["t"]) >= started]
    window = [e for e in log if measure_from <= float(e["t"]) <= end]
    mean_body = rc.get("refetch_body_bytes", 0) / max(1, rc.get("refetch_200", 0))
    # Measured after the run, the testbed still up: each 304'd URL's real 200 and 304 sizes (wirecost).
    costs = probe_costs(web, [u for e in log if e["status"] == 304 and locate(web, u := log_url(web, e))])
    byte_same = rc.get("not_modified", 0) + rc.get("same_digest", 0)
    return {
        "mean_freshness": round(statistics.fmean(samples), 4) if samples else 0.0,
        "min_freshness": round(min(samples), 4) if samples else 0.0,
        "mean_freshness_changing_pages": round(statistics.fmean(changing), 4) if changing else 0.0,
        "samples": len(samples),
        "stored_pages_mean": round(statistics.fmean(stored), 1) if stored else 0,
        "requests_per_s": round(len(window) / args.seconds, 2),
        "status_304_per_s": round(sum(e["status"] == 304 for e in window) / args.seconds, 2),
        "share_304_of_byte_unchanged_crawler": round(rc.get("not_modified", 0) / byte_same, 4)
        if byte_same
        else None,
        "conditional": conditional_figures(web, log, since=measure_from, until=end),
        "body_bytes_saved_est": int(rc.get("not_modified", 0) * mean_body),
        "conditional_wire": saved_figures(web, log, costs, conditional_sent=rc.get("conditional_sent", 0)),
        "mean_refetch_body_bytes": int(mean_body),
        "recrawl": rc,
        "pages_fetched": summary.get("pages_fetched"),
    }


def freshness_at(web: Web, db: Path, wall: float, *, test_time: Any) -> dict[str, int]:
    """Stored normal pages of the crawl database ``db`` at wall time ``wall`` (read-only) and how many are
    fresh; the same among pages whose content changes (``living.CONTENT_CLASSES``)."""
    out = {"stored": 0, "fresh": 0, "changing": 0, "fresh_changing": 0}
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.OperationalError:
        return out
    try:
        rows = con.execute(
            "SELECT u.url, r.fetched_at FROM revisits r JOIN urls u ON u.url_id = r.url_id WHERE r.digest != ''"
        ).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return out
    finally:
        con.close()
    t_now = test_time(wall)
    for url, fetched_at in rows:
        live = page_version(web, url, t_now)
        if live is None:
            continue  # robots.txt, sitemaps, sitemap-only leaves: not part of the measured collection
        copy = page_version(web, url, test_time(fetched_at))
        fresh = int(copy is not None and copy.version == live.version)
        out["stored"] += 1
        out["fresh"] += fresh
        if live.cls in CONTENT_CLASSES:
            out["changing"] += 1
            out["fresh_changing"] += fresh
    return out
