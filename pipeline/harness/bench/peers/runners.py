"""How each crawler of ``crawlfleet bench peers`` is started, at one politeness for all: ``per_host``
requests per host, robots.txt obeyed (as the ``crawlfleet`` agent, the token the testbed's truth uses), no
delay, the trap and the slow and huge pages denied, no depth limit. Each runs as a process of its own;
``run`` measures its wall time and the CPU of its whole process tree.

=================  ==========================================================================
crawler            what runs
=================  ==========================================================================
crawlfleet         ``crawlfleet crawl`` with its defaults, the bench politeness in a settings file
colly-perhost      the colly program (``colly/main.go``), one LimitRule of ``per_host`` per host
colly-global       the same with one rule of ``per_host`` requests in all (within the politeness)
scrapy             ``scrapy_spider.py`` in Scrapy's own virtualenv, broad-crawl settings
bare               ``peers/bare.py``: aiohttp + lexbor over the truth's URL list, no robots (the ceiling)
=================  ==========================================================================
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.harness.bench.peers import tools
from pipeline.harness.bench.treecpu import TreeCpu

PEERS = ("crawlfleet", "colly-perhost", "colly-global", "scrapy", "bare")
DENY = (r"/calendar/", r"/slow$", r"/big$")
AGENT = "crawlfleet/0.1 (bench peer {name})"  # robots.txt groups match the leading "crawlfleet" token


@dataclass(slots=True)
class Plan:
    """What every crawler of one scheme gets: seeds, the bare loop's URL list, DNS, CA, politeness."""

    workdir: Path
    seeds: list[str]
    urls: list[str]
    hosts: int
    dns: str  # HOST:PORT
    ca: str  # "" for http
    per_host: int
    timeout_s: float = 1800.0
    binaries: dict[str, Path] = field(default_factory=dict)  # "colly", "scrapy_python"


def prepare(names: list[str]) -> dict[str, Path]:
    """Build and install what ``names`` need (before any timing)."""
    out: dict[str, Path] = {}
    if any(n.startswith("colly") for n in names):
        out["colly"] = tools.colly_binary()
    if "scrapy" in names:
        out["scrapy_python"] = tools.scrapy_python()
    return out


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{x}\n" for x in lines))
    return path


def crawlfleet_config(plan: Plan) -> str:
    """The settings file of the crawlfleet peer: its defaults, with the bench's politeness and network."""
    deny = ", ".join(json.dumps(d) for d in DENY)
    ca = f"tls_ca_bundle = {json.dumps(plan.ca)}\n" if plan.ca else ""
    return (
        f'[dns]\nservers = ["{plan.dns}"]\n[security]\nallow_networks = ["127.0.10.0/24"]\n'
        f"[politeness]\nper_host_concurrency = {plan.per_host}\nper_ip_concurrency = {64 * plan.per_host}\n"
        f"min_host_delay_s = 0.0\nmax_crawl_delay_s = 0.0\n[scope]\nmax_depth = 100000\ndeny_regex = [{deny}]\n"
        f"[fetch]\nretry_backoff_s = 0.0\n{ca}"
    )


def command(name: str, plan: Plan, run_dir: Path) -> list[str]:
    """The command line of crawler ``name`` for one run in ``run_dir`` (created empty by the caller)."""
    seeds = _write(run_dir / "seeds.txt", plan.seeds)
    agent = AGENT.format(name=name)
    deny = [a for d in DENY for a in ("-deny", d)]
    if name == "crawlfleet":
        (run_dir / "bench.toml").write_text(crawlfleet_config(plan))
        return [sys.executable, "-m", "pipeline.cli", "crawl", "--seeds-file", str(seeds), "--out",
                str(run_dir / "crawl"), "--config", str(run_dir / "bench.toml"), "--json", "--no-progress"]  # fmt: skip
    if name.startswith("colly-"):
        return [str(plan.binaries["colly"]), "-seeds", str(seeds), "-dns", plan.dns, "-ca", plan.ca,
                "-mode", name.removeprefix("colly-"), "-parallelism", str(plan.per_host), "-hosts",
                str(plan.hosts), "-agent", agent, *deny]  # fmt: skip
    if name == "scrapy":
        return [str(plan.binaries["scrapy_python"]), str(tools.SCRAPY_SPIDER), "--seeds", str(seeds), "--dns",
                plan.dns, "--per-host", str(plan.per_host), "--agent", agent,
                *(a for d in DENY for a in ("--deny", d))]  # fmt: skip
    if name == "bare":
        urls = _write(run_dir / "urls.txt", plan.urls)
        return [sys.executable, "-m", "pipeline.harness.bench.peers.bare", "--urls", str(urls), "--hosts",
                str(plan.hosts), "--per-host", str(plan.per_host), "--ca", plan.ca]  # fmt: skip
    raise ValueError(f"unknown peer {name!r} (expected one of {', '.join(PEERS)})")


def run(name: str, plan: Plan, run_dir: Path, cpu: TreeCpu) -> dict[str, Any]:
    """Run crawler ``name`` to its end: exit code, wall seconds, CPU seconds of its process tree, the
    tail of its output. ``cpu`` counts every process started after it (the testbed runs outside it)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = command(name, plan, run_dir)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    c0, t0 = cpu.seconds(), time.perf_counter()
    with open(run_dir / "stdout", "wb") as out, open(run_dir / "stderr", "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=run_dir)
        try:
            code = proc.wait(plan.timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    wall = time.perf_counter() - t0
    cpu.settle(timeout_s=10.0)
    used = cpu.seconds() - c0
    tail = (run_dir / "stdout").read_text(errors="replace").strip().splitlines()[-1:]
    return {"exit": code, "wall_s": wall, "cpu_s": used, "said": tail[0][:300] if tail else "",
            "stderr": (run_dir / "stderr").read_text(errors="replace")[-600:] if code else ""}  # fmt: skip
