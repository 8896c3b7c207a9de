"""An idealised, offline simulation of the freshness bench (#23 point 8): no crawler, no HTTP.

Each host fetches one URL every hosts/budget seconds (exactly the bench's per-host budget), always the URL
with the earliest next fetch (work-conserving), and the schedule is the crawler's own:
``pipeline.frontier.hostrates.plan`` for each fetch (``Schedule.plan`` with, under the Poisson policy, the
host's ``mu``), as both crawl scales do. What a fetch sees comes from the living web's change function
(``living.state``): a content change is a new digest, a cosmetic one is not (as with the bench's
simhash), Last-Modified is the last byte change truncated to the second. Freshness is sampled after every fetch once ``warmup`` wall seconds have passed.

    python -m pipeline.harness.bench.freshsim [measured|classic] [WARMUP_S END_S]

It shows what the schedules do when nothing but the schedule differs (no fetch latency, no contention);
it is not a bench figure. May import: pipeline (bench room).
"""

from __future__ import annotations

import math
import statistics
import sys

from pipeline.frontier import hostrates
from pipeline.frontier.hostrates import HostRates
from pipeline.frontier.schedule import Observation, Schedule
from pipeline.harness.testbed.living import CONTENT_CLASSES, MEASURED, Living, state
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Revisit

HOSTS, PAGES, BUDGET, SEED = 12, 20, 12.0, 23
LOW, HIGH = 4.0, 600.0


def simulate(policy: str, living: Living, *, warmup: float, end: float) -> float:
    """Mean freshness over hosts and samples for ``policy`` (uniform, poisson or nutch)."""
    cycle = HOSTS * PAGES / BUDGET
    adaptive = policy != "uniform"
    cfg = RecrawlSettings(
        enabled=True, adaptive=adaptive, policy="poisson" if policy == "poisson" else "nutch",
        initial_interval_s=cycle, min_interval_s=LOW if adaptive else cycle,
        max_interval_s=HIGH if adaptive else cycle, simhash_bits=3,
    )  # fmt: skip
    schedule, means = Schedule(cfg), []
    for i in range(HOSTS):
        revisits: dict[int, Revisit] = {}
        due = dict.fromkeys(range(PAGES), 0.0)
        copy: dict[int, int] = {}
        rates, samples = HostRates(), []
        t = 0.5 + i * 0.05
        while t < end:
            m = min(due, key=due.__getitem__)
            s = state(SEED, i, m, living.test_time(t), mix=living.mix)
            obs = Observation(
                fetched_at=t, status=200, digest=str(s.version) if s.cls in CONTENT_CLASSES else "same",
                modified_at=math.floor(living.wall_time(s.modified_at)),
            )  # fmt: skip
            _, rv = hostrates.plan(
                schedule, rates, revisits.get(m), obs, url=f"u{m}", host="h", budget_rps=BUDGET / HOSTS
            )
            revisits[m], due[m], copy[m] = rv, rv.next_fetch, s.version
            t += HOSTS / BUDGET
            if t >= warmup:
                now = living.test_time(t)
                samples.append(
                    sum(v == state(SEED, i, k, now, mix=living.mix).version for k, v in copy.items()) / PAGES
                )
        means.append(statistics.fmean(samples))
    return statistics.fmean(means)


def main(argv: list[str]) -> int:
    mix = argv[0] if argv else MEASURED
    warmup, end = (float(argv[1]), float(argv[2])) if len(argv) >= 3 else (110.0, 210.0)
    cycle = HOSTS * PAGES / BUDGET
    living = Living(0.0, 7 * 86400.0 / cycle if mix == MEASURED else 120.0, mix=mix)
    got = {p: simulate(p, living, warmup=warmup, end=end) for p in ("uniform", "poisson", "nutch")}
    ratios = {p: round(v / got["uniform"], 3) for p, v in got.items()}
    print({"mix": mix, "warmup_s": warmup, "end_s": end, "freshness": {p: round(v, 4) for p, v in got.items()},
           "ratio_to_uniform": ratios})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
