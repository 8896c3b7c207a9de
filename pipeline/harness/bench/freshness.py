"""``crawlfleet bench freshness --json``: how fresh a continuous crawl keeps its collection, against uniform
revisiting and against an oracle (docs/bench/freshness.md).

The living testbed (``freshweb.MixedTestbed``: per-page change classes of a published change mix, real
ETag/Last-Modified/304, hosts i % 6 == 5 ignore validators) is crawled with ``crawl --continuous`` under the
same fetch budget by each mode (``freshrun``): ``uniform`` revisiting (the baseline), the ``adaptive``
schedule ``--policy`` (the crawler's default policy unless named), and with ``--modes ...,fleet`` the same
policy in a fleet crawl. Modes of one group (``--parallel`` at once) crawl at the same time against
testbeds that share one epoch: the same web changing at the same instants. Each mix (``--mixes``) is run
``--repeats`` times; the summary gives each figure's median and spread (min, max) over the repeats.

Test time is scaled so that the uniform revisit cycle N / budget is ``--cycle-test-s`` (a week): the
measured window is ``--seconds`` / cycle uniform cycles (the bench asks for at least 20).

Figures (Cho & Garcia-Molina's two metrics, from the testbed's truth: ``freshtruth``): mean freshness and
mean age of the stored copies over the measured window; the oracle's (``freshtruth.oracle``: the
freshness-optimal schedule knowing every page's true rate, expected values on the window's own changes)
and uniform's expected figures on the same changes; per mode its ratio to the same repeat's uniform run and
its **gain share** (F_mode - F_uniform) / (F_oracle - F_uniform), the share of the gain over uniform
revisiting that knowing the rates would give (for age the same with lower = better). Conditional GET: the
share of byte-unchanged re-fetches answered 304 on hosts that honour validators (goal >= 80 %), bytes sent
(the testbed logs each answer's size) and bytes per fresh page.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.harness.bench.freshrun import MODES, Plan, run_group
from pipeline.harness.bench.freshtruth import gain_share
from pipeline.harness.bench.jobs import machine
from pipeline.harness.testbed.living import CLASSIC, DOTCOM, MEASURED, MIXES
from pipeline.settings.recrawl import RecrawlSettings

GOAL_GAIN_SHARE = 0.75
GOAL_304_SHARE = 0.8
MIN_CYCLES = 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=50, help="testbed hosts")
    p.add_argument("--pages", type=int, default=40, help="normal pages per host (home included)")
    p.add_argument("--seed", type=int, default=23, help="seed of the testbed's random web")
    p.add_argument("--mixes", default=f"{MEASURED},{DOTCOM}", help=f"change mixes, comma-separated ({', '.join(MIXES)})")
    p.add_argument("--repeats", type=int, default=3, help="runs of each mix")
    p.add_argument("--modes", default="uniform,adaptive", help=f"comma-separated: {', '.join(MODES)}")
    p.add_argument("--parallel", type=int, default=2, help="modes crawling at once (one group)")
    p.add_argument("--cycle-test-s", type=float, default=7 * 86400.0,
                   help="the uniform revisit cycle in test seconds (sets the web's rate; classic: 120 test s/s)")  # fmt: skip
    p.add_argument("--policy", choices=("nutch", "poisson"), default=RecrawlSettings().policy,
                   help="the adaptive modes' policy (default: the crawler's default, recrawl.policy)")  # fmt: skip
    p.add_argument("--no-work-conserving", action="store_true", help="fetch only due URLs (budget may go unspent)")
    p.add_argument("--budget", type=float, default=100.0, help="fetch budget, requests per second in all")
    p.add_argument("--seconds", type=float, default=400.0, help="measured wall seconds per run (after --warmup)")
    p.add_argument("--warmup", type=float, default=120.0, help="wall seconds before sampling starts")
    p.add_argument("--sample-every", type=float, default=2.0, help="seconds between freshness samples")
    p.add_argument("--min-interval", type=float, default=4.0, help="adaptive: shortest revisit interval, s")
    p.add_argument("--max-interval", type=float, default=600.0, help="adaptive: longest revisit interval, s")
    p.add_argument("--simhash-bits", type=int, default=3, help="adaptive: near-duplicate distance (0 = digest only)")
    p.add_argument("--lying-validators", action="store_true",
                   help="the testbed's hosts i %% 12 == 7 send validators that never change and 304 them")  # fmt: skip


def _names(text: str, allowed: tuple[str, ...] | list[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise ValueError(f"--{what} {text!r}: expected a comma-separated list of {', '.join(allowed)}")
    return list(dict.fromkeys(names))


def run(args: argparse.Namespace) -> dict[str, Any]:
    mixes = _names(args.mixes, list(MIXES), "mixes")
    modes = _names(args.modes, MODES, "modes")
    if "uniform" not in modes:
        raise ValueError("--modes: uniform is the baseline every ratio needs")
    if args.repeats < 1 or args.parallel < 1:
        raise ValueError("--repeats and --parallel must be >= 1")
    with _broker("fleet" in modes) as broker_url:
        return _run(args, mixes, modes, broker_url)


@contextlib.contextmanager
def _broker(wanted: bool) -> Iterator[str]:
    if not wanted:
        yield ""
        return
    from pipeline.harness.faults.services import broker_vhost  # a vhost of its own, deleted after

    with broker_vhost() as url:
        yield url


def _run(args: argparse.Namespace, mixes: list[str], modes: list[str], broker_url: str) -> dict[str, Any]:
    uniform_s = args.hosts * args.pages / args.budget
    groups = [modes[i : i + args.parallel] for i in range(0, len(modes), args.parallel)]
    out: dict[str, Any] = {
        "bench": "freshness", "machine": machine(), "load_average_at_start": os.getloadavg(),
        "web": {"hosts": args.hosts, "pages": args.hosts * args.pages, "seed": args.seed},
        "budget_req_per_s": args.budget, "uniform_interval_s": round(uniform_s, 3), "policy": args.policy,
        "work_conserving": not args.no_work_conserving, "warmup_s": args.warmup, "measured_s": args.seconds,
        "cycles_measured": round(args.seconds / uniform_s, 1), "min_cycles": MIN_CYCLES,
        "repeats": args.repeats, "modes": modes, "groups": groups, "lying_validators": args.lying_validators,
        "goal_gain_share": GOAL_GAIN_SHARE, "goal_304_share": GOAL_304_SHARE, "mixes": {},
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-freshness-") as tmp:
        for mix in mixes:
            rate = 120.0 if mix == CLASSIC else args.cycle_test_s / uniform_s
            plan = Plan(args.hosts, args.pages, args.seed, mix, rate, args.budget, args.warmup, args.seconds,
                        args.sample_every, args.min_interval, args.max_interval, args.simhash_bits, args.policy,
                        not args.no_work_conserving, broker_url, args.lying_validators)  # fmt: skip
            runs = []
            for rep in range(args.repeats):
                run: dict[str, Any] = {"repeat": rep + 1, "groups": []}
                for g, group in enumerate(groups):
                    got = run_group(group, plan, Path(tmp) / mix / f"r{rep}" / f"g{g}")
                    got["load_average_at_start"] = os.getloadavg()
                    run["groups"].append({k: got[k] for k in ("window", "epoch", "oracle", "load_average_at_start")})
                    for mode in group:
                        run[mode] = {**got[mode], "oracle": got["oracle"]}
                run["ratios"] = {m: _ratios(run[m], run["uniform"]) for m in modes if m != "uniform"}
                runs.append(run)
            out["mixes"][mix] = {"rate": round(rate, 3), "runs": runs, "summary": _summary(runs, modes)}
    return out


def _ratios(mode: dict[str, Any], uniform: dict[str, Any]) -> dict[str, Any]:
    """One mode's figures against the same repeat's uniform run and its own window's oracle."""
    orc = mode["oracle"]
    f, fu, fo = mode["mean_freshness"], uniform["mean_freshness"], orc["optimal"]["freshness"]
    a, au, ao = mode["mean_age_s"], uniform["mean_age_s"], orc["optimal"]["age_s"]
    return {
        "freshness_to_uniform": round(f / fu, 4) if fu else None,
        "freshness_to_oracle": round(f / fo, 4) if fo else None,
        "gain_share": gain_share(f, fu, fo),
        # against the oracle's own expected uniform: the gain measured over the attainable gain computed
        "gain_share_computed_uniform": gain_share(f - fu + orc["uniform"]["freshness"], orc["uniform"]["freshness"], fo),
        "age_to_uniform": round(a / au, 4) if au else None,
        "age_to_oracle": round(a / ao, 4) if ao else None,
        "age_gain_share": gain_share(a, au, ao),
        "bytes_per_fresh_page_to_uniform": round(mode["wire_bytes_per_fresh_page"] / uniform["wire_bytes_per_fresh_page"], 4)
        if mode.get("wire_bytes_per_fresh_page") and uniform.get("wire_bytes_per_fresh_page")
        else None,
    }  # fmt: skip


def _stats(values: list[float | None]) -> dict[str, Any]:
    got = [v for v in values if v is not None]
    if not got:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": round(statistics.median(got), 4), "min": round(min(got), 4), "max": round(max(got), 4),
            "n": len(got)}  # fmt: skip


def _summary(runs: list[dict[str, Any]], modes: list[str]) -> dict[str, Any]:
    """Median and spread over the repeats of each mode's figures and ratios."""
    out: dict[str, Any] = {}
    for m in modes:
        figs = ("mean_freshness", "mean_age_s", "requests_per_s", "wire_bytes_per_fresh_page")
        row: dict[str, Any] = {k: _stats([r[m].get(k) for r in runs]) for k in figs}
        row["share_304_honouring_hosts"] = _stats([r[m]["conditional"]["share_304_honouring_hosts"] for r in runs])
        row["oracle_freshness"] = _stats([r[m]["oracle"]["optimal"]["freshness"] for r in runs])
        row["oracle_age_s"] = _stats([r[m]["oracle"]["optimal"]["age_s"] for r in runs])
        row["oracle_uniform_freshness"] = _stats([r[m]["oracle"]["uniform"]["freshness"] for r in runs])
        if m != "uniform":
            for k in runs[0]["ratios"][m]:
                row[k] = _stats([r["ratios"][m][k] for r in runs])
            share = row["gain_share"]["median"]
            row["goal_gain_share_met"] = share is not None and share >= GOAL_GAIN_SHARE
        out[m] = row
    return out
