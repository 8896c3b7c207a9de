"""The plots of ``crawlfleet bench dispatch --parts balance,flatness`` (matplotlib, PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.harness.bench.dispatchsim import BalanceResult
from pipeline.harness.bench.flatsim import FlatnessResult


def plot(where: Path, bal: dict[str, BalanceResult], flat: dict[str, FlatnessResult], *, quota: float,
         drift_at: int) -> dict[str, str]:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    where.mkdir(parents=True, exist_ok=True)
    paths = {}
    if flat:
        fig, ax = plt.subplots(figsize=(10, 4.2))
        labels = {"no_quota": "no quota", "quota_s1_alone": "quota, S1's rule alone (no pace)",
                  "quota": "quota, paced (a quota file's default)"}  # fmt: skip
        for name, lw in (("no_quota", 0.9), ("quota_s1_alone", 1.0), ("quota", 2.2)):
            ax.plot(flat[name].per_second, lw=lw, label=labels[name])
        ax.axhline(quota, color="k", ls="--", lw=0.8, label=f"quota m = {quota:g} URLs/s", zorder=5)
        for t, what in flat["quota"].events:
            if "dies" in what or "back" in what:
                ax.axvline(t, color="grey", ls=":", lw=0.8)
                ax.text(t, ax.get_ylim()[1] * 0.97, what.split()[0] + (" up" if "back" in what else " down"),
                        fontsize=7, rotation=90, va="top")  # fmt: skip
        ax.set(xlabel="simulated second", ylabel="URLs dispatched per second",
               title="S1 on the fleet's decision path: URLs dispatched per second")  # fmt: skip
        ax.legend(fontsize=8, loc="upper right")
        paths["rate"] = _save(fig, where / "dispatch_rate.png")
    if bal:
        drift = bal["drift"]
        fig, ax = plt.subplots(figsize=(10, 4.2))
        for name, trace in drift.n_trace.items():
            ax.step([t for t, _ in trace], [n for _, n in trace], where="post", label=name)
        fast = next(n for n in drift.n_trace if n.endswith("4x"))
        ax.axvline(drift.n_trace[fast][drift_at][0], color="grey", ls=":", lw=0.8)
        ax.set(xlabel="simulated second", ylabel="batch size n_i",
               title=f"S3: n_i per node (the 4x node halves its speed at its round {drift_at}; window 16)")
        ax.legend(fontsize=8)
        paths["n_i"] = _save(fig, where / "dispatch_ni.png")
        fig, ax = plt.subplots(figsize=(10, 4.2))
        for name in ("n_i", "equal", "oracle"):
            r = bal[name]
            ax.plot(range(len(r.spreads)), r.spreads, marker=".", label=f"{name} batches")
        ax.axhline(1.10, color="k", ls="--", lw=0.8, label="1.10")
        ax.set_yscale("log")
        ax.set(xlabel="round", ylabel="max/min batch duration", title="S3: spread of batch times per round")
        ax.legend(fontsize=8)
        paths["spread"] = _save(fig, where / "dispatch_spread.png")
    return paths


def _save(fig: Any, path: Path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
