"""``crawlfleet bench dispatch``: the fleet dispatcher's decisions at N simulated nodes, and what they cost.

``--parts decisions`` (the default): the real ``FleetDispatcher`` over a real ``CrawlCore``, without a
broker (decisions.py), at each ``--nodes`` size, ``--repeats`` times interleaved: per decision (S1's node
choice, ``CrawlCore.next_batch``, the batch's bookkeeping and encoding), per page replied (the completion
path and the links report), per heartbeat and per tick; each figure's median over the repeats and its
spread (max/min), and the ratio of the largest size to the next. Then how many nodes one dispatcher core
drives (``one_core``): the fleet crawl's own dispatcher CPU (per page and per second, measured at 2
nodes by ``bench fleet``: ``--fleet-ms-per-page``, ``--fleet-ms-per-s``) plus what grows with N here,
at ``--node-pages-per-s`` per node and ``--batch-pages`` per batch.

``--shards 1,2,3`` (with the decisions): the same at each node count as N dispatcher shards, each its share
of every node's slots, their shared records and remote queue faked in memory (``"simulated": true``;
sharddecisions.py): per shard the CPU per decision and per page, what a shard adds (the gate's ownership
check and claim per host, the lease fence, S5's block moves per URL and a heartbeat's fixed work), and
the wall: the nodes at which one shard's decision CPU, and its whole CPU by ``one_core``'s model, fills
one core, beside one dispatcher's from this run and as ratios to it (shardwall.py).

``--parts balance,flatness``: S3's batch sizing and S1's quota admission in simulated time on the same
decision path (``FleetNodes.choose`` + ``Dispatcher.offer``: dispatchsim.py, flatsim.py), each against a
baseline of the same run (equal batches, an oracle; no quota, S1 without the pace); plots to
``--plots-dir``. They check the rules' arithmetic on a model of the nodes; the fleet's own figures are
``bench s3`` and ``bench s1`` (docs/bench/s3.md, s1.md).
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

from pipeline.harness.bench.decisions import run_sizes
from pipeline.harness.bench.dispatchsim import T0, BalanceResult, simulate_balance
from pipeline.harness.bench.flatsim import FlatnessResult, simulate_flatness
from pipeline.harness.bench.sharddecisions import run_shard_counts
from pipeline.harness.bench.shardwall import Fleet, linear_at, walls
from pipeline.observe.errors import float_at_least, int_at_least
from pipeline.observe.machine import machine
from pipeline.settings import DispatchSettings

PARTS = ("decisions", "balance", "flatness")
MAX_SHARDS = 64
RATIOS = ("decision_us", "completion_us_per_page", "per_page_us", "heartbeat_us", "tick_us")


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nodes wants sizes like 2,100,1000, got {text!r}") from None
    if not sizes or sizes[0] < 1 or sizes[-1] > 20_000:
        raise argparse.ArgumentTypeError(f"--nodes sizes must be 1..20000, got {text!r}")
    return sizes


def _parts(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        raise argparse.ArgumentTypeError(f"--parts takes {', '.join(PARTS)}; got {text!r}")
    return parts


def _shard_counts(text: str) -> list[int]:
    try:
        counts = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected shard counts like 1,2,3, got {text!r}") from None
    if not counts or counts[0] < 1 or counts[-1] > MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"expected shard counts 1..{MAX_SHARDS}, got {text!r}")
    return counts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parts", type=_parts, default=["decisions"], help="decisions,balance,flatness")
    parser.add_argument("--nodes", type=_sizes, default=[2, 100, 1000], help="fleet sizes (2 = the fleet crawl's)")
    parser.add_argument("--repeats", type=int_at_least(1), default=3, help="runs of every size, interleaved")
    parser.add_argument("--seconds", type=float_at_least(0.1), default=2.0, help="timed turns per size and run")
    parser.add_argument("--slots", type=int_at_least(0), default=0,
                        help="virtual fetchers per node (0 = the worker's default)")  # fmt: skip
    parser.add_argument("--node-pages-per-s", type=float, default=330.0,
                        help="pages/s one node fetches (bench fleet runs 13b-13d: 667-710 over 2 nodes)")  # fmt: skip
    parser.add_argument("--fleet-ms-per-page", type=float, default=0.038,
                        help="the fleet crawl's dispatcher CPU per page at the margin (runs 13b-13d: 0.029-0.038)")  # fmt: skip
    parser.add_argument("--fleet-ms-per-s", type=float, default=23.0,
                        help="the fleet crawl's dispatcher CPU per second, fixed part (runs 13b-13d: 18-23)")  # fmt: skip
    parser.add_argument("--batch-pages", type=float, default=64.0, help="pages per batch (k)")
    parser.add_argument("--shards", type=_shard_counts, default=[],
                        help="dispatcher shard counts to measure beside one dispatcher, e.g. 1,2,3 (simulated seams)")  # fmt: skip
    parser.add_argument("--new-hosts-per-page", type=float_at_least(0.0), default=1 / 16,
                        help="hosts new to a shard per page (the shard wall's gate checks; the bench web's: 1/16)")  # fmt: skip
    parser.add_argument("--moved-share", type=float_at_least(0.0), default=0.16,
                        help="share of pages whose host moved in a block (bench shards' skewed crawl: 601 of 3,729)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="shorter simulations (for development)")
    parser.add_argument("--plots-dir", default="", help="where the simulations' PNG plots go ('' = none)")
    parser.add_argument("--quota", type=float, default=200.0, help="S1 quota (URLs/s) of the flatness simulation")
    parser.add_argument("--seed", type=int, default=1, help="seed of the simulations")


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"machine": machine(), "tree": tree(), "settings": _settings_dict(DispatchSettings())}
    if "decisions" in args.parts or args.shards:
        dec = run_sizes(args.nodes, repeats=args.repeats, seconds=args.seconds, slots=args.slots or None)
        if len(args.nodes) >= 2:
            big, small = args.nodes[-1], args.nodes[-2]
            b, s = dec[f"nodes_{big}"]["median"], dec[f"nodes_{small}"]["median"]
            dec[f"ratio_{big}_over_{small}"] = {k: _ratio(b[k], s[k]) for k in ("decision_us", "heartbeat_us",
                                                "tick_us", "completion_us_per_page", "per_page_us")}  # fmt: skip
        if 2 in args.nodes:
            dec["one_core"] = one_core(dec, args)
        out["decisions"] = dec
        if args.shards:
            out["shards"] = shards(args, dec)
    bal: dict[str, BalanceResult] = {}
    if "balance" in args.parts:
        out.update(balance(args, bal))
    flat: dict[str, FlatnessResult] = {}
    if "flatness" in args.parts:
        out["s1_flatness"] = flatness(args, flat)
    if args.plots_dir and (bal or flat):
        from pipeline.harness.bench.dispatchplots import plot

        drift_at = out.get("s3_drift", {}).get("fastest_halves_at_round", 0)
        out["plots"] = plot(Path(args.plots_dir), bal, flat, quota=args.quota, drift_at=drift_at)
    return out


# --- how many nodes one core drives -------------------------------------------------------------------
def one_core(dec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Seconds of dispatcher CPU per second at N nodes: the fleet crawl's figures (at 2 nodes) plus what
    grows with N, from this run's medians, linear in N between the sizes measured (and past the largest):

        cpu(N) = N*P*c + F + (N*P/B) * (a(N) - a(2)) + (N*h(N) - 2*h(2)) / heartbeat_s + (x(N) - x(2)) / tick_s

    P pages/s per node, c and F the fleet crawl's CPU per page and per second, B pages per batch, a the
    decision, h a heartbeat, x a tick. ``nodes`` is the largest N with cpu(N) <= 1."""
    sizes = sorted(int(k.removeprefix("nodes_")) for k in dec if k.startswith("nodes_"))
    med = {n: dec[f"nodes_{n}"]["median"] for n in sizes}
    d = DispatchSettings()
    tick_s = min(0.5, d.heartbeat_s / 4)
    p, c, f, b = args.node_pages_per_s, args.fleet_ms_per_page / 1e3, args.fleet_ms_per_s / 1e3, args.batch_pages

    def at(name: str, n: float) -> float:
        return linear_at(med, name, n) / 1e6

    def terms(n: int) -> dict[str, float]:
        return {
            "pages": n * p * c, "fixed": f,
            "decisions": n * p / b * (at("decision_us", n) - at("decision_us", 2)),
            "heartbeats": (n * at("heartbeat_us", n) - 2 * at("heartbeat_us", 2)) / d.heartbeat_s,
            "ticks": (at("tick_us", n) - at("tick_us", 2)) / tick_s,
        }

    nodes = 2
    while nodes < 100_000 and sum(terms(nodes + 1).values()) <= 1.0:
        nodes += 1
    return {
        "inputs": {"node_pages_per_s": p, "fleet_ms_per_page": args.fleet_ms_per_page,
                   "fleet_ms_per_s": args.fleet_ms_per_s, "batch_pages": b, "heartbeat_s": d.heartbeat_s,
                   "tick_s": tick_s},
        "nodes": nodes, "pages_per_s": round(nodes * p),
        "cpu_s_per_s_terms_at_nodes": {k: round(v, 4) for k, v in terms(nodes).items()},
        "cores_needed": {str(n): round(sum(terms(n).values()), 2) for n in (100, 1000)},
    }  # fmt: skip


def shards(args: argparse.Namespace, dec: dict[str, Any]) -> dict[str, Any]:
    """N dispatcher shards at each node count, and the walls beside one dispatcher's (shardwall.py)."""
    counts = [s for s in args.shards if s > 1]
    got = run_shard_counts(counts, args.nodes, repeats=args.repeats, seconds=args.seconds, slots=dec["slots_per_node"])
    d = DispatchSettings()
    fleet = Fleet(args.node_pages_per_s, args.batch_pages, args.fleet_ms_per_page / 1e3, args.fleet_ms_per_s / 1e3,
                  d.heartbeat_s, min(0.5, d.heartbeat_s / 4), d.shard_heartbeat_s, args.new_hosts_per_page,
                  args.moved_share)  # fmt: skip
    base = {n: dec[f"nodes_{n}"]["median"] for n in args.nodes}
    by = {s: {n: got[f"shards_{s}"][f"nodes_{n}"]["median"] for n in args.nodes} for s in counts}
    return {
        "simulated": True,
        "seams": "owner, lease and shard-state records in memory (no HBase); remote queue a list (no RabbitMQ)",
        "inputs": {**{k: getattr(fleet, k) for k in fleet.__dataclass_fields__}, "shard_block_urls": d.shard_block_urls},
        **got, "over_one_dispatcher": {f"shards_{s}": {f"nodes_{n}": {k: _ratio(by[s][n].get(k), base[n].get(k))
                                       for k in RATIOS} for n in args.nodes} for s in counts},
        "wall": walls(base, by, fleet),
    }  # fmt: skip


# --- the simulations ----------------------------------------------------------------------------------
def balance(args: argparse.Namespace, bal: dict[str, BalanceResult]) -> dict[str, Any]:
    rounds = 15 if args.quick else 40
    bal.update({s: simulate_balance(sizing=s, rounds=rounds, seed=args.seed) for s in ("n_i", "equal", "oracle")})
    calm = simulate_balance(sizing="n_i", rounds=rounds, page_cv=1e-3, seed=args.seed)
    summ = {s: _steady(r) for s, r in bal.items()}
    drift_rounds, drift_at = (30, 10) if args.quick else (60, 20)
    drift = {}
    for window in (4, 16):
        r = simulate_balance(sizing="n_i", rounds=drift_rounds, drift_at=drift_at, seed=args.seed,
                             settings=DispatchSettings(history_window=window))  # fmt: skip
        if window == 16:
            bal["drift"] = r
        after, before = r.spreads[drift_at + 1 :], r.spreads[5:drift_at]
        recover = next((i for i, v in enumerate(after) if all(x <= 1.10 for x in after[i : i + 3])), None)
        drift[f"window_{window}"] = {
            "rounds_to_recover_le_1_10": recover, "peak_spread_after": round(max(after), 3),
            "median_spread_before": round(sorted(before)[len(before) // 2], 4),
        }  # fmt: skip
    return {
        "s3_balance": {
            "speeds": [1, 2, 4], "page_time_cv": 0.25, "rounds": rounds, **summ, "n_i_no_jitter": _steady(calm),
            "median_spread_equal_over_n_i": _ratio(summ["equal"]["median_spread"], summ["n_i"]["median_spread"]),
            "median_spread_n_i_over_oracle": _ratio(summ["n_i"]["median_spread"], summ["oracle"]["median_spread"]),
        },
        "s3_drift": {"fastest_halves_at_round": drift_at, **drift},
    }  # fmt: skip


def flatness(args: argparse.Namespace, flat: dict[str, FlatnessResult]) -> dict[str, Any]:
    dur = (2 if args.quick else 10) * 60
    kw: dict[str, Any] = {"duration_s": dur, "die_at": dur * 0.25, "flap_down": dur * 0.4, "flap_up": dur * 0.55}
    flat.update({
        "quota": simulate_flatness(quota=args.quota, **kw),
        "quota_s1_alone": simulate_flatness(quota=args.quota, paced=False, **kw),
        "quota_wall_rate": simulate_flatness(quota=args.quota, rate_mode="wall", **kw),
        "no_quota": simulate_flatness(quota=None, **kw),
        "no_quota_ample_urls": simulate_flatness(quota=None, seed_urls=400_000, **kw),
    })  # fmt: skip
    fs = {name: r.summary() for name, r in flat.items()}
    q = fs["quota"]
    return {
        "fleet": "nodes 1x, 2x, 4x (dies), 2x (dies, returns), 1x; 1x = 60 URLs/s; a dispatch round every 50 ms",
        "events": flat["quota"].events, **fs,
        "cv_quota_over_no_quota": _ratio(q["cv"], fs["no_quota"]["cv"]),
        "cv_s1_alone_over_no_quota": _ratio(fs["quota_s1_alone"]["cv"], fs["no_quota"]["cv"]),
    }  # fmt: skip


def _steady(r: BalanceResult) -> dict[str, float]:
    """Summary over the rounds whose batches all started after every node had one batch timed."""
    t_all = max(trace[0][0] + r.durations[name][0] for name, trace in r.n_trace.items())
    warm = next((i for i in range(len(r.spreads)) if min(tr[i][0] for tr in r.n_trace.values()) >= t_all),
                len(r.spreads) - 1)  # fmt: skip
    return {**r.summary(warmup=warm), "warmup_rounds": warm}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def tree() -> str:
    """The measured tree: the checkout's commit, "+changes" when it has uncommitted ones ("" outside git)."""
    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+changes" if dirty else "")


def _settings_dict(s: DispatchSettings) -> dict[str, Any]:
    return {f: getattr(s, f) for f in s.__dataclass_fields__} | {"sim_t0": T0}
