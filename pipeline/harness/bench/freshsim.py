"""An idealised, offline simulation of the freshness bench: no crawler, no HTTP. A unit check of the
schedules, not a bench figure (the figures come from real crawls of the living testbed).

Each host fetches one URL every hosts/budget seconds (exactly the bench's per-host budget), always the URL
with the earliest next fetch (work-conserving), and the schedule is the crawler's own:
``pipeline.frontier.hostrates.plan`` for each fetch, as both crawl scales do. What a fetch sees comes from
the living web's change function (``living.state``): a content change is a new digest, a cosmetic one is
not (as with the bench's simhash), Last-Modified is the last byte change truncated to the second.
Freshness and age are sampled every second once ``warmup`` wall seconds have passed; the oracle is
``freshtruth.oracle`` over the same window.

    python -m pipeline.harness.bench.freshsim [--mix measured] [--hosts 50 --pages 40 --budget 100]
        [--warmup 120 --end 520] [--policy uniform,nutch,poisson]

May import: pipeline (bench room).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from dataclasses import dataclass
from typing import Any

from pipeline.frontier import hostrates
from pipeline.frontier.hostrates import HostRates
from pipeline.frontier.schedule import Observation, Schedule
from pipeline.harness.bench.freshtruth import gain_share, oracle
from pipeline.harness.testbed.living import CONTENT_CLASSES, MEASURED, MIXES, Living, next_change, state
from pipeline.harness.testbed.model import Web
from pipeline.harness.testbed.validators import http_date
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Revisit

WEEK_S = 7 * 86400.0
EPOCH = 1_700_000_000.0  # wall time of the simulated web's test time 0 (HTTP dates need a real epoch)


@dataclass(frozen=True, slots=True)
class SimWeb:
    hosts: int = 50
    pages: int = 40
    budget: float = 100.0
    seed: int = 23
    mix: str = MEASURED
    low: float = 4.0
    high: float = 600.0

    @property
    def cycle(self) -> float:
        return self.hosts * self.pages / self.budget

    def living(self) -> Living:
        return Living(EPOCH, WEEK_S / self.cycle if self.mix != "classic" else 120.0, mix=self.mix)


def settings_for(policy: str, web: SimWeb, **extra: Any) -> RecrawlSettings:
    """The bench's settings for ``policy`` (uniform, nutch or poisson), with ``extra`` fields."""
    adaptive = policy != "uniform"
    return RecrawlSettings(
        enabled=True, adaptive=adaptive, policy="poisson" if policy == "poisson" else "nutch",
        initial_interval_s=web.cycle, min_interval_s=min(web.low, web.cycle) if adaptive else web.cycle,
        max_interval_s=max(web.high, web.cycle) if adaptive else web.cycle, simhash_bits=3, **extra,
    )  # fmt: skip


def simulate(cfg: RecrawlSettings, web: SimWeb, *, warmup: float, end: float) -> dict[str, float]:
    """Mean freshness and age (wall s) over hosts and samples under ``cfg``."""
    living = web.living()
    schedule = Schedule(cfg)
    gap = web.hosts / web.budget
    fresh_sum = age_sum = 0.0
    samples = 0
    for i in range(web.hosts):
        revisits: dict[int, Revisit] = {}
        due = dict.fromkeys(range(web.pages), 0.0)
        stale_at: dict[int, float] = {}  # page -> wall time its copy went stale
        rates = HostRates()
        t = EPOCH + 0.5 + i * gap / web.hosts
        next_sample, stop = EPOCH + warmup, EPOCH + end
        while t < stop:
            m = min(due, key=due.__getitem__)
            s = state(web.seed, i, m, living.test_time(t), mix=living.mix)
            modified = math.floor(living.wall_time(s.modified_at))
            obs = Observation(
                fetched_at=t, status=200, digest=str(s.version) if s.cls in CONTENT_CLASSES else "same",
                modified_at=modified, last_modified=http_date(modified),
            )  # fmt: skip
            _, rv = hostrates.plan(
                schedule, rates, revisits.get(m), obs, url=f"u{m}", host="h", budget_rps=web.budget / web.hosts
            )
            revisits[m], due[m] = rv, rv.next_fetch
            stale_at[m] = living.wall_time(next_change(web.seed, i, m, living.test_time(t), mix=living.mix))
            t += gap
            while next_sample <= t and next_sample < stop:
                fresh = sum(v > next_sample for v in stale_at.values())
                fresh_sum += fresh / web.pages
                age_sum += sum(next_sample - v for v in stale_at.values() if v <= next_sample) / web.pages
                samples += 1
                next_sample += 1.0
    return {"freshness": fresh_sum / max(samples, 1), "age_s": age_sum / max(samples, 1)}


def compare(web: SimWeb, policies: list[str], *, warmup: float, end: float, **extra: Any) -> dict[str, Any]:
    got = {p: simulate(settings_for(p, web, **(extra if p != "uniform" else {})), web, warmup=warmup, end=end)
           for p in policies}  # fmt: skip
    living = web.living()
    w = Web(web.hosts, web.pages, seed=web.seed, port=1, living=living)
    orc = oracle(w, host_budget_rps=web.budget / web.hosts, low=web.low, high=web.high, since=EPOCH + warmup,
                 until=EPOCH + end)  # fmt: skip
    out: dict[str, Any] = {"web": dataclasses.asdict(web), "warmup_s": warmup, "end_s": end, "oracle": orc}
    u = got.get("uniform")
    o_f = orc["optimal"]["freshness"]  # type: ignore[index]
    o_a = orc["optimal"]["age_s"]  # type: ignore[index]
    for p, v in got.items():
        row: dict[str, Any] = {k: round(x, 4) for k, x in v.items()}
        if u is not None and p != "uniform":
            row["freshness_ratio"] = round(v["freshness"] / u["freshness"], 4)
            row["gain_share"] = gain_share(v["freshness"], u["freshness"], o_f)
            row["age_gain_share"] = gain_share(v["age_s"], u["age_s"], o_a)
        out[p] = row
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="freshsim")
    p.add_argument("--mix", choices=tuple(MIXES), default=MEASURED)
    p.add_argument("--hosts", type=int, default=50)
    p.add_argument("--pages", type=int, default=40)
    p.add_argument("--budget", type=float, default=100.0)
    p.add_argument("--seed", type=int, default=23)
    p.add_argument("--warmup", type=float, default=120.0)
    p.add_argument("--end", type=float, default=520.0)
    p.add_argument("--policy", default="uniform,nutch,poisson")
    a = p.parse_args(argv)
    web = SimWeb(a.hosts, a.pages, a.budget, a.seed, a.mix)
    print(json.dumps(compare(web, a.policy.split(","), warmup=a.warmup, end=a.end)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
