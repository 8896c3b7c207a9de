"""``crawlfleet bench dispatch``: S3 balance and S1 flatness simulations, plus the real Dispatcher's cost.

Every figure comes with a baseline from the same run: n_i sizing vs equal batches (and vs an oracle
that knows the true speeds), quota vs no quota, 1,000 fetchers vs 10. Plots go to ``--plots-dir``.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fetchers.records import Batch, UrlTask
from pipeline.dispatch.protocols import Heartbeat
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.sim import (
    T0,
    BalanceResult,
    FlatnessResult,
    SimClock,
    make_dispatcher,
    simulate_balance,
    simulate_flatness,
    url_stream,
)
from pipeline.observe.machine import machine as _host_machine
from pipeline.settings import DispatchSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="shorter runs (for development)")
    parser.add_argument("--plots-dir", default="docs/bench", help="where to write the PNG plots ('' = none)")
    parser.add_argument("--fetchers", type=int, default=1000, help="fleet size for the cost measurement")
    parser.add_argument("--decisions", type=int, default=20_000, help="decisions timed per measurement")
    parser.add_argument("--quota", type=float, default=200.0, help="S1 quota (URLs/s) for the flatness run")
    parser.add_argument("--seed", type=int, default=1, help="seed of the testbed's (or the simulation's) random web")


def run(args: argparse.Namespace) -> dict[str, Any]:
    rounds = 15 if args.quick else 40
    minutes = 2 if args.quick else 10
    decisions = 2000 if args.quick else args.decisions
    out: dict[str, Any] = {"machine": machine(), "settings": _settings_dict(DispatchSettings())}

    # --- S3 balance -------------------------------------------------------------------------------
    bal = {s: simulate_balance(sizing=s, rounds=rounds, seed=args.seed) for s in ("n_i", "equal", "oracle")}
    calm = simulate_balance(sizing="n_i", rounds=rounds, page_cv=1e-3, seed=args.seed)
    summ = {s: _steady(r) for s, r in bal.items()}
    out["s3_balance"] = {
        "speeds": [1, 2, 4], "page_time_cv": 0.25, "rounds": rounds,
        "n_i": summ["n_i"], "equal": summ["equal"], "oracle": summ["oracle"],
        "n_i_no_jitter": _steady(calm),
        "median_spread_equal_over_n_i": round(summ["equal"]["median_spread"] / summ["n_i"]["median_spread"], 2),
        "median_spread_n_i_over_oracle": round(summ["n_i"]["median_spread"] / summ["oracle"]["median_spread"], 3),
        "goal_median_spread_le_1_10": summ["n_i"]["median_spread"] <= 1.10,
    }  # fmt: skip
    drift_rounds, drift_at = (30, 10) if args.quick else (60, 20)
    drift = {}
    drift_runs: dict[int, BalanceResult] = {}
    for window in (4, 16):
        st = DispatchSettings(history_window=window)
        r = simulate_balance(sizing="n_i", rounds=drift_rounds, drift_at=drift_at, settings=st, seed=args.seed)
        drift_runs[window] = r
        after = r.spreads[drift_at + 1 :]
        recover = next((i for i, v in enumerate(after) if all(x <= 1.10 for x in after[i : i + 3])), None)
        before = r.spreads[5:drift_at]
        drift[f"window_{window}"] = {
            "rounds_to_recover_le_1_10": recover, "peak_spread_after": round(max(after), 3),
            "median_spread_before": round(sorted(before)[len(before) // 2], 4),
        }  # fmt: skip
    out["s3_drift"] = {"fastest_halves_at_round": drift_at, **drift}

    # --- S1 flatness ------------------------------------------------------------------------------
    dur = minutes * 60
    kw: dict[str, Any] = {"duration_s": dur, "die_at": dur * 0.25, "flap_down": dur * 0.4, "flap_up": dur * 0.55}
    flat = {
        "quota": simulate_flatness(quota=args.quota, **kw),
        "quota_wall_rate": simulate_flatness(quota=args.quota, rate_mode="wall", **kw),
        "quota_near_capacity": simulate_flatness(quota=340.0, **kw),
        "no_quota": simulate_flatness(quota=None, **kw),
        "no_quota_ample_urls": simulate_flatness(quota=None, seed_urls=400_000, **kw),
    }
    fs = {name: r.summary() for name, r in flat.items()}
    for v in fs.values():
        v.pop("per_fetcher_urls", None)
    q = fs["quota"]
    out["s1_flatness"] = {
        "fleet": "1x, 2x, 4x (dies), 2x (dies, returns), 1x; 1x = 60 URLs/s; client polls every 50 ms",
        "events": flat["quota"].events, **fs,
        "cv_quota_over_no_quota": _ratio(q["cv"], fs["no_quota"]["cv"]),
        "cv_quota_over_no_quota_ample_urls": _ratio(q["cv"], fs["no_quota_ample_urls"]["cv"]),
        "goal_cv_le_0_10": q["cv"] <= 0.10,
        "goal_quota_never_exceeded": q["max_minute_over_quota"] <= 0 and q["cum_over_budget"] <= 0,
        "goal_zero_batches_to_dead": q["batches_to_dead"] == 0,
    }  # fmt: skip

    # --- cost of the real Dispatcher --------------------------------------------------------------
    big = measure_cost(args.fetchers, decisions)
    small = measure_cost(10, decisions)
    out["cost"] = {
        f"fetchers_{args.fetchers}": big, "fetchers_10": small,
        "next_batch_rate_ratio_big_over_10": _ratio(big["next_batch_per_s"], small["next_batch_per_s"]),
        "offer_rate_ratio_big_over_10": _ratio(big["offer_per_s"], small["offer_per_s"]),
        "bytes_per_fetcher_ratio_big_over_10": _ratio(big["bytes_per_fetcher"], small["bytes_per_fetcher"]),
    }  # fmt: skip

    if args.plots_dir:
        out["plots"] = plot(Path(args.plots_dir), bal, drift_runs[16], drift_at, flat, args.quota)
    return out


def _steady(r: BalanceResult) -> dict[str, float]:
    """Summary over the rounds whose batches all started after every fetcher had one batch timed."""
    t_all = max(trace[0][0] + r.durations[name][0] for name, trace in r.n_trace.items())
    warm = next((i for i in range(len(r.spreads)) if min(tr[i][0] for tr in r.n_trace.values()) >= t_all),
                len(r.spreads) - 1)  # fmt: skip
    return {**r.summary(warmup=warm), "warmup_rounds": warm}


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


class NullFrontier:
    """A FrontierLike that costs almost nothing (hands out slices of one task pool), so the timings
    below are the dispatcher's own work, not a frontier's."""

    def __init__(self, size: int = 1024) -> None:
        self.pool = url_stream(0, size, 64)

    def lease(self, fetcher_id: str, n: int, now: float) -> list[UrlTask]:
        return self.pool[:n]

    def release(self, fetcher_id: str, now: float, *, host_delays: Mapping[str, float] = {}) -> None:
        return None

    def requeue(self, fetcher_id: str, tasks: Sequence[UrlTask]) -> None:
        return None

    def available(self, now: float) -> int:
        return len(self.pool)


def measure_cost(fetchers: int, decisions: int) -> dict[str, Any]:
    """Time next_batch, complete and offer on the real Dispatcher, and its memory, at ``fetchers``."""
    clock = SimClock()
    settings = DispatchSettings(heartbeat_s=3600.0, lease_s=0.0, service="bench")
    frontier = NullFrontier()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    d = make_dispatcher(settings, frontier, Quotas.unlimited(), clock)
    names = [f"fetcher-{i:05d}" for i in range(fetchers)]
    for i, name in enumerate(names):  # fast fetchers, so S1's u never runs out during the timing
        d.heartbeat(Heartbeat(name, clock.now, 0, 0, 5000.0 + i % 7, 256, address=f"10.0.{i // 250}.{i % 250}:9000"))
    for r in range(settings.history_window):  # full histories, then one batch outstanding each
        for i, name in enumerate(names):
            b = d.offer(name, "bench")
            assert isinstance(b, Batch)
            d.complete(b.serial, fetcher_id=name, pages=len(b.tasks), elapsed_s=len(b.tasks) / (50.0 + i % 7 + r))
    held = [d.offer(name, "bench") for name in names]
    mem = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    for b in held:
        assert isinstance(b, Batch)
        d.complete(b.serial, fetcher_id=b.fetcher_id, pages=len(b.tasks), elapsed_s=1.0)
    t_next = t_done = t_offer = 0.0
    for _ in range(decisions):
        clock.now += 0.01  # seconds and minutes roll over during the run (index rebuilds included)
        t = time.perf_counter()
        b = d.next_batch("bench")
        t_next += time.perf_counter() - t
        assert isinstance(b, Batch), b
        t = time.perf_counter()
        d.complete(b.serial, fetcher_id=b.fetcher_id, pages=len(b.tasks), elapsed_s=len(b.tasks) / 50.0)
        t_done += time.perf_counter() - t
    for i in range(decisions):
        name = names[i % fetchers]
        t = time.perf_counter()
        b = d.offer(name, "bench")
        t_offer += time.perf_counter() - t
        assert isinstance(b, Batch), b
        d.complete(b.serial, fetcher_id=name, pages=len(b.tasks), elapsed_s=len(b.tasks) / 50.0)
    return {
        "fetchers": fetchers, "decisions": decisions,
        "next_batch_per_s": round(decisions / t_next), "complete_per_s": round(decisions / t_done),
        "offer_per_s": round(decisions / t_offer),
        "memory_bytes": mem, "bytes_per_fetcher": round(mem / fetchers),
        "note": "dispatcher only: a no-cost frontier stub hands out slices of one task pool",
        "memory_note": "tracemalloc: dispatcher state with full page-time histories and one outstanding "
                       "batch per fetcher (the batch lists, not the shared UrlTask objects)",
    }  # fmt: skip


def plot(
    where: Path, bal: dict[str, BalanceResult], drift: BalanceResult, drift_at: int,
    flat: dict[str, FlatnessResult], quota: float,
) -> dict[str, str]:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    where.mkdir(parents=True, exist_ok=True)
    paths = {}
    fig, ax = plt.subplots(figsize=(10, 4.2))
    labels = {"no_quota": "no quota", "quota_wall_rate": "quota, p = wall-clock rate",
              "quota": "quota, p = busy rate"}  # fmt: skip
    for name, lw in (("no_quota", 0.9), ("quota_wall_rate", 1.0), ("quota", 2.2)):
        ax.plot(flat[name].per_second, lw=lw, label=labels[name])
    ax.axhline(quota, color="k", ls="--", lw=0.8, label=f"quota m = {quota:g} URLs/s", zorder=5)
    for t, what in flat["quota"].events:
        if "dies" in what or "back" in what:
            ax.axvline(t, color="grey", ls=":", lw=0.8)
            ax.text(t, ax.get_ylim()[1] * 0.97, what.split()[0] + (" up" if "back" in what else " down"),
                    fontsize=7, rotation=90, va="top")  # fmt: skip
    ax.set(xlabel="simulated second", ylabel="URLs dispatched per second",
           title="S1: URLs dispatched per second (quota vs none)")  # fmt: skip
    ax.legend(fontsize=8, loc="upper right")
    paths["rate"] = _save(fig, where / "dispatch_rate.png")

    fig, ax = plt.subplots(figsize=(10, 4.2))
    for name, trace in drift.n_trace.items():
        ax.step([t for t, _ in trace], [n for _, n in trace], where="post", label=name)
    fast = next(n for n in drift.n_trace if n.endswith("4x"))
    ax.axvline(drift.n_trace[fast][drift_at][0], color="grey", ls=":", lw=0.8)
    ax.set(xlabel="simulated second", ylabel="batch size n_i",
           title=f"S3: n_i per fetcher (the 4x fetcher halves its speed at its round {drift_at}; window 16)")
    ax.legend(fontsize=8)
    paths["n_i"] = _save(fig, where / "dispatch_ni.png")

    fig, ax = plt.subplots(figsize=(10, 4.2))
    for name, r in bal.items():
        ax.plot(range(len(r.spreads)), r.spreads, marker=".", label=f"{name} batches")
    ax.axhline(1.10, color="k", ls="--", lw=0.8, label="goal 1.10")
    ax.set_yscale("log")
    ax.set(xlabel="round", ylabel="max/min batch duration", title="S3: spread of batch times per round")
    ax.legend(fontsize=8)
    paths["spread"] = _save(fig, where / "dispatch_spread.png")
    return paths


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return str(path)


def machine() -> dict[str, Any]:
    return {**_host_machine(), "t0": T0}


def _settings_dict(s: DispatchSettings) -> dict[str, Any]:
    return {f: getattr(s, f) for f in s.__dataclass_fields__}
