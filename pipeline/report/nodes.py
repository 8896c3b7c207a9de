"""The report's per-node view: virtual fetchers ``<node>#<i>`` folded into their node, with the node's
last S1 heartbeat figures (successes, failures, rate, free slots) when the crawl's summary has them.

The fleet runs each node as ``slots`` virtual fetchers and the embedded crawl splits its one process
the same way, so a table per fetcher is mostly rows of zeros; a crawl engineer reads nodes. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def node_of(fetcher_id: str) -> str:
    """``n1#3`` -> ``n1``; an id without ``#`` is its own node."""
    return fetcher_id.split("#", 1)[0] or "(unnamed)"


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def nodes_table(fetchers: Mapping[str, Mapping[str, Any]], summary: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per node: fetchers, results, batches, mean batch, mean of the last n_i and t_i, and heartbeats."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for fid, f in fetchers.items():
        grouped.setdefault(node_of(fid), []).append(f)
    beats = (summary.get("fleet") or {}).get("node_heartbeats") or {}
    out: dict[str, dict[str, Any]] = {}
    for node, rows in sorted(grouped.items()):
        batches = sum(int(r.get("batches") or 0) for r in rows)
        urls = sum(float(r.get("mean_batch") or 0) * int(r.get("batches") or 0) for r in rows)
        hb = beats.get(node) if isinstance(beats, Mapping) else None
        out[node] = {
            "fetchers": len(rows),
            "results": sum(int(r.get("results") or 0) for r in rows),
            "batches": batches,
            "mean_batch": round(urls / batches, 2) if batches else None,
            "n_i_mean": _mean([float(r["n_i_last"]) for r in rows if r.get("n_i_last") is not None]),
            "t_i_mean": _mean([float(r["t_i_last"]) for r in rows if r.get("t_i_last") is not None]),
            "heartbeat": dict(hb) if isinstance(hb, Mapping) else None,
        }
    return out


def series_by_node(series: Mapping[str, list[tuple[float, float]]]) -> dict[str, list[tuple[float, float]]]:
    """Per-fetcher (x, y) series folded per node: at each x, the mean y of that node's fetchers."""
    acc: dict[str, dict[float, list[float]]] = {}
    for fid, pts in series.items():
        per_x = acc.setdefault(node_of(fid), {})
        for x, y in pts:
            per_x.setdefault(x, []).append(y)
    return {node: [(x, sum(ys) / len(ys)) for x, ys in sorted(per_x.items())] for node, per_x in sorted(acc.items())}
