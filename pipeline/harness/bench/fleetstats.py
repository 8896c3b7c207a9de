"""What a fleet bench run's events and CPU samples say: the dispatcher's CPU split into a per-page and a
per-second part, what kept the nodes idle, the link lag and the link rounds behind it; and what the web
server saw (``served``). Pure: from events, samples and log lines to figures."""

from __future__ import annotations

import re
from typing import Any

from pipeline.harness.bench.cputrace import CpuRates

FIT_BUCKET_S = 2.0  # CPU samples every 0.2 s; a bucket holds ~10, and several batch replies


def served(log: list[dict[str, Any]]) -> dict[str, int]:
    """From the testbed's access log (the judge, not the crawler's own counts): pages answered (distinct
    URLs other than robots.txt), every request for them, and the requests beyond one per URL."""
    seen: dict[tuple[str, str], int] = {}
    for e in log:
        if e.get("path") == "/robots.txt":
            continue
        key = (str(e.get("host")), str(e.get("path")))
        seen[key] = seen.get(key, 0) + 1
    requests = sum(seen.values())
    return {"pages": len(seen), "requests": requests, "repeats": requests - len(seen)}


def _rates_fields(rates: CpuRates | None) -> dict[str, Any]:
    """The steady window's CPU split: ms per page at the margin, ms per second of timers (cputrace)."""
    if rates is None:
        return {}
    return {
        "dispatcher_cpu_ms_per_page_marginal": round(1000 * rates.per_page_s, 4),
        "dispatcher_cpu_ms_per_s_fixed": round(1000 * rates.per_s, 2),
        "dispatcher_cpu_fit": {"buckets": rates.buckets, "bucket_s": FIT_BUCKET_S, "r2": round(rates.r2, 3)},
    }


def _idle_stats(events: list[dict[str, Any]], f: dict[str, Any], window: float) -> dict[str, Any]:
    """What keeps the nodes idle (#18 point 4): share of the window with no batch out at all, and with
    fewer batches out than half the slots; a batch's round trip (issue to reply on the dispatcher's
    clock) beside the node's own fetch time, their difference being queueing, the serial check,
    storing the pages and the reply; batch sizes; batches per node; the dispatcher's loop turns and
    dispatch rounds per second (its fixed CPU) and the share of rounds that issued nothing."""
    issued = {ev["serial"]: ev for ev in events if ev["ev"] == "issue"}
    done = [ev for ev in events if ev["ev"] == "done" and ev["serial"] in issued]
    if not issued or not done or not window > 0:
        return {}
    level, last = 0, min(ev["t"] for ev in issued.values())
    share: dict[str, float] = {"none": 0.0, "under_8": 0.0}
    for t, step in sorted([(ev["t"], 1) for ev in issued.values()] + [(ev["t"], -1) for ev in done]):
        share["none"] += (t - last) * (level == 0)
        share["under_8"] += (t - last) * (level < 8)
        last, level = t, level + step
    trips = sorted(ev["t"] - issued[ev["serial"]]["t"] for ev in done)
    extra = sorted(ev["t"] - issued[ev["serial"]]["t"] - ev["elapsed_s"] for ev in done)
    sizes = sorted(ev["n"] for ev in issued.values())
    per_node: dict[str, int] = {}
    for ev in issued.values():
        per_node[ev["node"]] = per_node.get(ev["node"], 0) + 1
    rounds = f.get("dispatch_rounds", 0)
    return {
        "share_no_batch_out": round(share["none"] / window, 3),
        "share_under_8_batches_out": round(share["under_8"] / window, 3),
        "round_trip_s": {"p50": round(_q(trips, 0.5), 3), "p90": round(_q(trips, 0.9), 3)},
        "round_trip_minus_node_fetch_s": {"p50": round(_q(extra, 0.5), 3), "p90": round(_q(extra, 0.9), 3)},
        "batch_size": {"p10": _q(sizes, 0.1), "p50": _q(sizes, 0.5), "p90": _q(sizes, 0.9), "mean": round(sum(sizes) / len(sizes), 1)},
        "batches_per_node": per_node,
        "loop_turns_per_s": round(f.get("loop_turns", 0) / window, 1),
        "dispatch_rounds_per_s": round(rounds / window, 1),
        "empty_round_share": round(f.get("empty_rounds", 0) / rounds, 3) if rounds else None,
    }  # fmt: skip


def _q(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))]


def _link_lag(events: list[dict[str, Any]]) -> dict[str, float] | None:
    """Seconds from a batch's reply (its segment closed) to the links report naming that segment."""
    replied = {ev["segment"]: ev["t"] for ev in events if ev["ev"] == "done" and ev.get("segment")}
    lags = sorted(ev["t"] - replied[seg] for ev in events if ev["ev"] == "links"
                  for seg in ev.get("names", ()) if seg in replied)  # fmt: skip
    if not lags:
        return None
    return {
        "p50": round(lags[len(lags) // 2], 3),
        "p95": round(lags[int(len(lags) * 0.95)], 3),
        "n": len(lags),
    }


def median_spread(values: list[float]) -> dict[str, float | None]:
    """The median of ``values`` and their spread (max / min), None for no values."""
    vals = sorted(v for v in values if v is not None and v == v)
    if not vals:
        return {"median": None, "min": None, "max": None, "spread": None}
    mid = vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2
    return {"median": round(mid, 4), "min": round(vals[0], 4), "max": round(vals[-1], 4),
            "spread": round(vals[-1] / vals[0], 3) if vals[0] > 0 else None}  # fmt: skip


def summarize(args: Any, embedded: dict[str, list[dict[str, Any]]],
              fleet: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:  # fmt: skip
    """Medians and spreads over the repeats; each fleet runner's pages/s as a ratio to the embedded crawl
    on the same store and on SQLite, median of the per-repeat ratios (each repeat's crawls ran side by side)."""
    emb = {store: {"pages_per_s": median_spread([r["pages_per_s"] for r in runs]), "runs": runs}
           for store, runs in embedded.items()}  # fmt: skip
    out: dict[str, Any] = {}
    for runner, runs in fleet.items():
        row: dict[str, Any] = {"segments": runs[0]["segments"] if runs else None}
        row["pages_per_s"] = median_spread([r["pages_per_s"] for r in runs])
        for store, eruns in embedded.items():
            ratios = [f["pages_per_s"] / e["pages_per_s"] for f, e in zip(runs, eruns, strict=False) if e["pages_per_s"]]
            row[f"ratio_to_embedded_{store}"] = median_spread(ratios)
        for name in ("p50_s", "p95_s"):
            row[f"link_lag_{name}"] = median_spread([r["link_lag"].get(name) for r in runs])
        row["job_cpu_ms_per_page"] = median_spread([r["job_cpu_ms_per_page"] for r in runs])
        row["bare_cpu_ms_per_page"] = median_spread([r["bare_cpu_ms_per_page"] for r in runs])
        row["job_cpu_x_bare"] = median_spread([r["job_cpu_ms_per_page"] / r["bare_cpu_ms_per_page"]
                                               for r in runs if r["bare_cpu_ms_per_page"]])  # fmt: skip
        for name in ("links_children_cpu_ms_per_page", "links_service_cpu_ms_per_page", "links_children_x_bare",
                     "extract_cpu_ms_per_page", "extract_x_bare"):
            row[name] = median_spread([float(r[name]) for r in runs if r.get(name) is not None])
        row["segment_bytes_per_page"] = median_spread([r["segment_bytes_per_page"] for r in runs])
        row["dispatcher_cpu_ms_per_page"] = median_spread([r["dispatcher_cpu_ms_per_page"] for r in runs])
        row["runs"] = runs
        out[runner] = row
    return {
        "testbed": {"hosts": args.hosts, "pages_per_host": args.pages, "seed": args.seed},
        "store": args.store, "workers": args.workers, "per_host": args.per_host, "repeats": args.repeats,
        "embedded": emb, "fleet": out,
    }  # fmt: skip


# Parses the link service's ``ROUND_LINE`` (pipeline/transport/links/service.py; a unit test formats one with it).
ROUND_RE = re.compile(r"links round \d+: (\d+) segments, .* in ([\d.]+)s \(extract ([\d.]+)s, merge ([\d.]+)s"
                      r"(?:; (\d+) results, CPU extract ([\d.]+)s, merge ([\d.]+)s)?\)")


def link_rounds(log_text: str) -> dict[str, Any] | None:
    """The link service's rounds, from its log (one line a round, ``LinkJobsService._report``): how many,
    segments a round, and a round's seconds from its claim to its report with the extract job's and the
    merge's parts (the rest waited for the previous round's merge; on a cluster runner one job does both,
    counted as the extract). The link lag is the wait for a claim (the service busy with earlier rounds)
    plus these."""
    matches = list(ROUND_RE.finditer(log_text))
    if not matches:
        return None
    rows = [tuple(float(x) for x in m.groups()[:4]) for m in matches]
    cols = [sorted(col) for col in zip(*rows, strict=True)]

    def q(col: list[float]) -> dict[str, float]:
        return {"p50": round(_q(col, 0.5), 3), "p95": round(_q(col, 0.95), 3), "max": round(col[-1], 3)}

    out: dict[str, Any] = {"count": len(rows), "segments": q(cols[0]), "seconds": q(cols[1]),
                           "extract_s": q(cols[2]), "merge_s": q(cols[3])}  # fmt: skip
    cpu = [(int(m[5]), float(m[6]), float(m[7])) for m in matches if m[5] is not None]
    if cpu:
        out["cpu"] = round_cpu(cpu)
    return out


def round_cpu(rounds: list[tuple[int, float, float]]) -> dict[str, Any]:
    """Where the link jobs' CPU goes, from (results, extract CPU-s, merge CPU-s) a round: the totals, and
    each job's CPU fitted as a fixed cost a round plus a cost per result (least squares over the rounds),
    which says whether many small rounds or the work itself costs. Pure."""
    results = sum(r[0] for r in rounds)
    out: dict[str, Any] = {"rounds": len(rounds), "results": results}
    for i, name in ((1, "extract"), (2, "merge")):
        total = sum(r[i] for r in rounds)
        fixed, per = _fit([float(r[0]) for r in rounds], [r[i] for r in rounds])
        out[name] = {"cpu_s": round(total, 3), "ms_per_result": round(1000 * total / results, 4) if results else None,
                     "fixed_s_per_round": round(fixed, 4), "marginal_ms_per_result": round(1000 * per, 4)}  # fmt: skip
    return out


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through the points; a flat line when xs do not vary."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my, 0.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope
