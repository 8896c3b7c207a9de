"""``crawlfleet bench peers``: crawlfleet's embedded default against gocolly/colly v2 (Go), Scrapy and the bare
aiohttp + lexbor loop, on one testbed web, in one run, at one politeness (``--per-host`` requests per host,
robots.txt obeyed, no delay; ``runners.py`` says how each is started).

Every figure comes from the testbed's access log, not from the crawlers' own counts (``judge.py``), plus
the CPU seconds of each crawler's whole process tree. Each crawler runs ``--repeats`` times, one at a time,
interleaved (the order rotates every repeat); per crawler the medians, minima, maxima and spreads are
given, and crawlfleet's ratios to the others from the medians. colly runs in two settings that keep the
politeness (a LimitRule of N per host; one rule of N in all) and the faster one by median pages/s is
"colly" in the ratios. ``--scheme https`` crawls the same web over the testbed's TLS port (its own CA,
trusted by each crawler through its own setting; Scrapy verifies nothing); ``both`` does both in each
repeat. The tools are built or installed before anything is timed (``tools.py``).

Goals (issue #40): pages/s >= 1.5x colly's and CPU per page <= 0.67x colly's, on HTTP and on HTTPS;
pages/s >= 25x Scrapy's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

from pipeline.harness.bench.peers import runners
from pipeline.harness.bench.peers.judge import Key, fastest, interleaved, judge_run, ratios, summarize
from pipeline.harness.bench.treecpu import TreeCpu
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.harness.testbed.truth import compute_truth
from pipeline.observe.errors import UsageError, int_at_least

MAX_DEPTH = 100_000  # no depth limit for anyone: the truth is every page reachable
SKIPPED = ("/slow", "/big")  # denied to every crawler (runners.DENY): a 1.5 s sleep and a 5 MB body


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int_at_least(1), default=200, help="testbed hosts (default 200)")
    p.add_argument("--pages", type=int_at_least(1), default=150, help="pages per host (default 150)")
    p.add_argument("--seed", type=int, default=0, help="seed of the testbed's link graph")
    p.add_argument("--per-host", type=int_at_least(1), default=4, help="requests per host for every crawler")
    p.add_argument("--repeats", type=int_at_least(1), default=3, help="runs of every crawler (default 3)")
    p.add_argument("--scheme", choices=("http", "https", "both"), default="http", help="crawl over http, https or both")
    p.add_argument("--peers", default=",".join(runners.PEERS),
                   help=f"comma list of crawlers (default all: {','.join(runners.PEERS)})")  # fmt: skip
    p.add_argument("--testbed-workers", type=int_at_least(1), default=1, help="testbed server processes")
    p.add_argument("--timeout-s", type=int_at_least(1), default=1800, help="longest one crawler may run")
    p.add_argument("--out", default="", help="keep every run's directory here (default: a temporary one)")


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in runners.PEERS]
    if bad or not names:
        raise UsageError(f"--peers {text!r}: expected a comma list of {', '.join(runners.PEERS)}")
    return names


def _key(url: str) -> Key:
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    return (scheme, authority.rsplit(":", 1)[0], slash + path)


def truth_of(tb: TestbedProcess, scheme: str) -> dict[str, Any]:
    truth = compute_truth(tb.web_for(scheme), max_depth=MAX_DEPTH)
    pages = [u for u in truth["pages"] if not u.endswith(SKIPPED)]
    fetch = truth["fetch_urls"] + truth["redirect_hops"]
    return {"pages": pages, "page_keys": {_key(u) for u in pages}, "fetch_keys": {_key(u) for u in fetch}}


def _new_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    lines = [json.loads(x) for x in data[:end].splitlines() if x.endswith(b"}")]
    return lines, offset + end


def run(args: argparse.Namespace) -> dict[str, Any]:
    names = _names(args.peers)
    schemes = ["http", "https"] if args.scheme == "both" else [args.scheme]
    binaries = runners.prepare(names)
    workdir = Path(args.out or tempfile.mkdtemp(prefix="bench-peers-"))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {s: {n: [] for n in names} for s in schemes}
    with TestbedProcess(args.hosts, args.pages, seed=args.seed, workers=args.testbed_workers,
                        tls="https" in schemes, workdir=workdir / "testbed") as tb:  # fmt: skip
        truths = {s: truth_of(tb, s) for s in schemes}
        plans = {
            s: runners.Plan(workdir, tb.web_for(s).seeds(), truths[s]["pages"], args.hosts, tb.dns_server,
                            tb.ca_file if s == "https" else "", args.per_host, float(args.timeout_s), binaries)
            for s in schemes
        }  # fmt: skip
        cpu = TreeCpu()  # after the testbed started: it stays outside the counted tree
        offset = tb.access_log.stat().st_size if tb.access_log.exists() else 0
        try:
            for r in range(args.repeats):
                for scheme in schemes:
                    for name in interleaved(names, r):
                        got = runners.run(name, plans[scheme], workdir / f"{scheme}-{name}-{r}", cpu)
                        tb.wait_log_flush()
                        lines, offset = _new_lines(tb.access_log, offset)
                        t = truths[scheme]
                        fig = judge_run(lines, t["page_keys"], truth_fetch=t["fetch_keys"], cpu_s=got["cpu_s"],
                                        wall_s=got["wall_s"])  # fmt: skip
                        fig.update(repeat=r, exit=got["exit"], said=got["said"])
                        if got["exit"]:
                            fig["stderr"] = got["stderr"]
                        runs[scheme][name].append(fig)
                        print(f"bench peers: {scheme} {name} #{r}: {fig['pages']} pages, {fig['pages_per_s']} "
                              f"pages/s, {fig['cpu_s_per_1k_pages']} CPU-s/1k, exit {got['exit']}",
                              file=sys.stderr, flush=True)  # fmt: skip
        finally:
            method = cpu.method
            cpu.close()
    return _report(args, names, schemes, runs, truths, method)


def _report(args: argparse.Namespace, names: list[str], schemes: list[str],
            runs: dict[str, dict[str, list[dict[str, Any]]]], truths: dict[str, Any], method: str) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "cpu_method": method},
        "params": {k: getattr(args, k) for k in ("hosts", "pages", "seed", "per_host", "repeats", "scheme")},
        "peers": names,
    }
    for scheme in schemes:
        summaries = {n: summarize(runs[scheme][n]) for n in names}
        colly = fastest(summaries, "colly-")
        others = {"colly": colly} if colly else {}
        others.update({n: n for n in ("scrapy", "bare") if n in names})
        r = ratios(summaries, "crawlfleet", others) if "crawlfleet" in names else {}
        goals = {}
        if "colly_pages_per_s" in r:
            goals["pages_per_s_ge_1.5x_colly"] = r["colly_pages_per_s"] >= 1.5
            goals["cpu_per_page_le_0.67x_colly"] = r.get("colly_cpu_per_page", 9.9) <= 0.67
        if "scrapy_pages_per_s" in r:
            goals["pages_per_s_ge_25x_scrapy"] = r["scrapy_pages_per_s"] >= 25
        out[scheme] = {"truth_pages": len(truths[scheme]["pages"]), "colly_fastest_setting": colly,
                       "summary": summaries, "ratios": r, "goals": goals, "runs": runs[scheme]}  # fmt: skip
    return out
