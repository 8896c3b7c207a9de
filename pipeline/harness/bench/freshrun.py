"""One group of the freshness bench's crawls: its modes crawl at the same time, each against its own living
testbed, every testbed of the group with the same seed and the same epoch: the same web, changing at the
same instants, so the modes see the same changes and their oracle is one computation.

Modes: ``uniform`` (every normal page every N / budget seconds: the baseline), ``adaptive`` (the embedded
crawl under ``--policy``), ``notrust`` (the same without per-host trust in change signals,
``recrawl.signal_trust = false``: validators on every re-fetch, as before it) and ``fleet`` (the same
policy in a fleet crawl: one node, the link jobs, the dispatcher; its schedule comes from the link jobs'
crawl-db update). Every crawl has the same budget: one
connection per host and a host delay of hosts / budget seconds, so the web's ``budget`` requests per
second in all; each is work-conserving unless asked otherwise (when nothing is due, the URLs due soonest
are fetched), so each spends the budget. Only the web's normal pages are in scope (the collection the
oracle counts: no redirect chains, traps, error pages or huge pages), and sitemaps are off (revisiting is
measured here, not discovery).

Each mode's figures: mean freshness and age of its stored copies sampled every ``sample_every`` seconds
after ``warmup`` (``freshtruth.sample``), requests and 304s per second and bytes sent in the measured
window (the testbed's access log), the conditional-GET shares (``freshweb.conditional_figures``) and the
crawl's own re-fetch counts.

May import: pipeline (bench room).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.harness.bench.continuous import ContinuousCrawl
from pipeline.harness.bench.freshfleet import FleetCrawl
from pipeline.harness.bench.freshtruth import Copy, oracle, sample
from pipeline.harness.bench.freshweb import MixedTestbed, conditional_figures, wire_figures
from pipeline.harness.testbed.model import Web

MODES = ("uniform", "adaptive", "notrust", "fleet")
NORMAL_PAGES = (r"^http://[^/]+/$", r"^http://[^/]+/p/[0-9]+$")  # the scope: the web's normal pages


@dataclass(frozen=True, slots=True)
class Plan:
    """What every group of one bench run shares."""

    hosts: int
    pages: int
    seed: int
    mix: str
    rate: float  # test seconds per wall second
    budget: float  # requests per second in all
    warmup: float
    seconds: float
    sample_every: float
    min_interval: float
    max_interval: float
    simhash_bits: int
    policy: str
    work_conserving: bool
    broker_url: str = ""
    lying_validators: bool = False  # the testbed's hosts i % 12 == 7 send validators that never change

    @property
    def uniform_s(self) -> float:
        return self.hosts * self.pages / self.budget

    @property
    def bounds(self) -> tuple[float, float]:
        return min(self.min_interval, self.uniform_s), max(self.max_interval, self.uniform_s)


def config(mode: str, plan: Plan) -> str:
    """The crawl's settings file for ``mode``."""
    adaptive = mode != "uniform"
    low, high = plan.bounds if adaptive else (plan.uniform_s, plan.uniform_s)
    lines = [
        "[politeness]", "per_host_concurrency = 1", f"min_host_delay_s = {plan.hosts / plan.budget!r}",
        "[scope]", f"allow_regex = {json.dumps(list(NORMAL_PAGES))}", "max_depth = 50",
        "[recrawl]", f"adaptive = {str(adaptive).lower()}", f"initial_interval_s = {plan.uniform_s!r}",
        f'policy = "{plan.policy}"', f"work_conserving = {str(plan.work_conserving).lower()}",
        f"min_interval_s = {low!r}", f"max_interval_s = {high!r}",
        f"simhash_bits = {plan.simhash_bits if adaptive else 0}", "check_interval_s = 0.5",
        f"failed_interval_s = {plan.uniform_s!r}", "requeue_batch = 200", "sitemaps = false",
        f"signal_trust = {str(mode != 'notrust').lower()}",
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def run_group(modes: list[str], plan: Plan, work: Path) -> dict[str, Any]:
    """Crawl ``modes`` at once; their figures by mode, the window and the oracle of that window."""
    epoch = time.time() + 2.0
    with contextlib.ExitStack() as stack:
        tbs: dict[str, MixedTestbed] = {}
        for mode in modes:
            tb = MixedTestbed(plan.hosts, plan.pages, mix=plan.mix, seed=plan.seed, mutate_rate=plan.rate,
                              mutate_epoch=epoch, workdir=work / mode / "testbed", hostile_sitemaps=False,
                              lying_validators=plan.lying_validators)  # fmt: skip
            tbs[mode] = stack.enter_context(tb)
        crawls: dict[str, ContinuousCrawl | FleetCrawl] = {}
        for mode in modes:
            crawl = _crawl(mode, plan, tbs[mode], work / mode)
            stack.enter_context(crawl)
            crawls[mode] = crawl
        started = time.time()
        measure_from, end = started + plan.warmup, started + plan.warmup + plan.seconds
        samples: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        while time.time() < end:
            time.sleep(plan.sample_every)
            for mode, crawl in crawls.items():
                if not crawl.running():
                    raise RuntimeError(f"{mode} crawl ended early: {crawl.stderr_tail(2000)}")
            now = time.time()
            if now < measure_from:
                continue
            for mode in modes:
                web = Web(plan.hosts, plan.pages, seed=plan.seed, port=tbs[mode].port, living=tbs[mode].living)
                bodies, confirmed, recorded = _copies(work / mode / "crawl" / "crawl.db")
                got = sample(web, bodies, now)
                by_confirmed, by_records = sample(web, confirmed, now), sample(web, recorded, now)
                if got.stored:
                    samples[mode].append({"fresh": got.fresh / got.stored, "age_s": got.age_s / got.stored,
                                          "stored": got.stored, "changing": got.fresh_changing / max(got.changing, 1),
                                          "fresh_confirmed": by_confirmed.fresh / max(by_confirmed.stored, 1),
                                          "fresh_records": by_records.fresh / max(by_records.stored, 1)})  # fmt: skip
        out: dict[str, Any] = {"window": [round(measure_from, 3), round(end, 3)], "epoch": epoch}
        for mode, crawl in crawls.items():
            code, stdout, stderr = crawl.stop(timeout_s=180)
            if code != 0:
                raise RuntimeError(f"{mode} crawl failed ({code}): {stderr[-2000:]}")
            out[mode] = _figures(plan, tbs[mode], stdout, samples[mode], started, measure_from, end)
        any_tb = next(iter(tbs.values()))
        web = Web(plan.hosts, plan.pages, seed=plan.seed, port=any_tb.port, living=any_tb.living)
    low, high = plan.bounds
    out["oracle"] = oracle(web, host_budget_rps=plan.budget / plan.hosts, low=low, high=high,
                           since=measure_from, until=end)  # fmt: skip
    return out


def _crawl(mode: str, plan: Plan, tb: MixedTestbed, out: Path) -> ContinuousCrawl | FleetCrawl:
    out.mkdir(parents=True, exist_ok=True)
    cfg, stop = out / "crawl.toml", out / "stop"
    cfg.write_text(config(mode, plan))
    if mode == "fleet":
        return FleetCrawl(tb.seeds, out=out / "crawl", config=cfg, stop_file=stop, broker_url=plan.broker_url,
                          dns_port=tb.dns_port, workdir=out / "fleet")  # fmt: skip
    cmd = [
        sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out / "crawl"),
        "--dns-server", f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
        "--json", "--no-progress", "--config", str(cfg), "--continuous", "--stop-file", str(stop),
    ]  # fmt: skip
    return ContinuousCrawl(cmd, stop)


def _copies(db: Path) -> tuple[list[Copy], list[Copy], list[Copy]]:
    """The stored copies of crawl db ``db`` (read-only), dated three ways.

    The figure's dating (the first list): a copy is the page body the store holds (``pages``), and it holds
    the content the page had when that body was fetched, whatever the crawler concluded since: a 304 or an
    unchanged digest keeps the body, and on a host whose validators lie a 304 keeps a stale one. The
    other two are for comparison, taken from what the crawler believes: ``confirmed`` dates a copy by the
    later of its body and its last re-fetch found unchanged (the re-crawl record), ``recorded`` by the
    re-crawl record alone (in the fleet the link jobs' crawl-db update writes it a round after the node
    stored the body)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.OperationalError:
        return [], [], []
    try:
        rows = con.execute(
            "SELECT u.url, p.fetched_at, r.fetched_at, r.digest FROM pages p JOIN urls u ON u.url_id = p.url_id "
            "LEFT JOIN revisits r ON r.url_id = p.url_id"
        ).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return [], [], []
    finally:
        con.close()
    bodies = [Copy(url, float(body_at)) for url, body_at, _, _ in rows]
    confirmed = [Copy(url, max(float(body_at), float(seen_at or 0.0))) for url, body_at, seen_at, _ in rows]
    recorded = [Copy(url, float(seen_at)) for url, _, seen_at, digest in rows if digest]
    return bodies, confirmed, recorded


def _figures(
    plan: Plan, tb: MixedTestbed, stdout: str, samples: list[dict[str, float]], started: float,
    measure_from: float, end: float,
) -> dict[str, Any]:  # fmt: skip
    summary = json.loads(stdout.strip().splitlines()[-1])
    rc = summary.get("recrawl", {})
    tb.wait_log_flush()
    log = [e for e in tb.read_access_log() if float(e["t"]) >= started]
    window = [e for e in log if measure_from <= float(e["t"]) <= end]
    web = Web(plan.hosts, plan.pages, seed=plan.seed, port=tb.port, living=tb.living)
    fresh = [s["fresh"] for s in samples]
    wire = wire_figures(web, log, since=measure_from, until=end, conditional_sent=rc.get("conditional_sent", 0))
    fresh_pages = statistics.fmean(s["fresh"] * s["stored"] for s in samples) if samples else 0.0
    return {
        "mean_freshness": round(statistics.fmean(fresh), 4) if fresh else 0.0,
        "min_freshness": round(min(fresh), 4) if fresh else 0.0,
        "mean_freshness_confirmed": round(statistics.fmean(s["fresh_confirmed"] for s in samples), 4) if samples else 0.0,
        "mean_freshness_records": round(statistics.fmean(s["fresh_records"] for s in samples), 4) if samples else 0.0,
        "mean_age_s": round(statistics.fmean(s["age_s"] for s in samples), 3) if samples else 0.0,
        "mean_freshness_changing_pages": round(statistics.fmean(s["changing"] for s in samples), 4)
        if samples
        else 0.0,
        "samples": len(samples),
        "stored_pages_mean": round(statistics.fmean(s["stored"] for s in samples), 1) if samples else 0,
        "requests_per_s": round(len(window) / plan.seconds, 2),
        "status_304_per_s": round(sum(e["status"] == 304 for e in window) / plan.seconds, 2),
        "conditional": conditional_figures(web, log, since=measure_from, until=end),
        "wire": wire,
        "wire_bytes_per_fresh_page": round(wire["wire_bytes"] / fresh_pages) if fresh_pages else None,
        "recrawl": rc,
        "pages_fetched": summary.get("pages_fetched"),
    }
