"""Fold a crawl directory's stats rows and segment records into the report's numbers, in one pass each.

Pure: takes iterables of rows/records (see ``data.py``) and returns plain dataclasses; the plots,
the HTML and the JSON are all drawn from ``ReportStats``. Memory grows with hosts, fetchers, batches
and seconds of crawl, never with pages.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.report.data import SegmentRecord
from pipeline.urls import host_of

# Report latency buckets: 0.1 ms .. 100 s, ten per decade (finer than the live stats' four).
BOUNDS_S: tuple[float, ...] = tuple(10 ** (e / 10) for e in range(-40, 21))
PHASES = ("dns", "connect", "ttfb", "total")
STEADY_TRIM = 0.1  # ramp-up and drain excluded from the flatness figures: first and last 10% of rows


class LogHistogram:
    """Counts in fixed log-spaced buckets; percentiles are interpolated geometrically inside a bucket."""

    __slots__ = ("counts", "n", "zeros")

    def __init__(self) -> None:
        self.counts = [0] * (len(BOUNDS_S) + 1)
        self.n = 0
        self.zeros = 0  # phases not measured (0.0): connection reuse, cached DNS

    def add(self, value: float) -> None:
        if value <= 0:
            self.zeros += 1
            return
        self.counts[bisect.bisect_left(BOUNDS_S, value)] += 1
        self.n += 1

    def percentile(self, q: float) -> float | None:
        if self.n == 0:
            return None
        rank = q * self.n
        seen = 0
        for i, c in enumerate(self.counts):
            if c and seen + c >= rank:
                hi = BOUNDS_S[min(i, len(BOUNDS_S) - 1)]
                lo = BOUNDS_S[i - 1] if 0 < i <= len(BOUNDS_S) else hi / 10 ** 0.1
                frac = (rank - seen) / c
                return lo * (hi / lo) ** frac
            seen += c
        return BOUNDS_S[-1]  # pragma: no cover - rank <= n always lands in a bucket

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "not_measured": self.zeros,
            "p50_s": _r(self.percentile(0.5)),
            "p90_s": _r(self.percentile(0.9)),
            "p99_s": _r(self.percentile(0.99)),
            "counts": self.counts,
        }


@dataclass(slots=True)
class Timeline:
    """Per-interval series; ``t`` is seconds since the crawl started, at the end of each interval."""

    source: str = "none"  # "stats.jsonl", "segments" (fallback from fetched_at) or "none"
    t: list[float] = field(default_factory=list)
    pages_per_s: list[float] = field(default_factory=list)
    bytes_per_s: list[float] = field(default_factory=list)
    errors_per_s: list[float] = field(default_factory=list)
    queue: list[int | None] = field(default_factory=list)
    dns_hit_rate: list[float | None] = field(default_factory=list)
    dns_hit_rate_cum: list[float | None] = field(default_factory=list)
    fetcher_n: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    fetcher_t: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


@dataclass(slots=True)
class SegmentAgg:
    records: int = 0
    pages: int = 0
    failed: int = 0
    bytes: int = 0
    hosts: dict[str, list[int]] = field(default_factory=dict)  # host -> [pages, errors]
    status: dict[int, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    depth: dict[int, int] = field(default_factory=dict)
    fetcher_pages: dict[str, int] = field(default_factory=dict)
    latency: dict[str, LogHistogram] = field(default_factory=lambda: {p: LogHistogram() for p in PHASES})
    batches: dict[tuple[str, int], list[float]] = field(default_factory=dict)  # -> [urls, first fetched_at]
    per_second: dict[int, list[int]] = field(default_factory=dict)  # second -> [pages, bytes, errors]


@dataclass(slots=True)
class ReportStats:
    summary: dict[str, Any]
    timeline: Timeline
    segments: SegmentAgg
    quota_per_s: float | None
    bad_lines: dict[str, int]
    politeness: dict[str, Any] = field(default_factory=dict)  # pipeline.report.politeness


def aggregate_segments(records: Iterable[SegmentRecord]) -> SegmentAgg:
    agg = SegmentAgg()
    lat = agg.latency
    for r in records:
        agg.records += 1
        try:
            host = host_of(r.url)
        except ValueError:
            host = "(invalid url)"
        entry = agg.hosts.get(host)
        if entry is None:
            entry = agg.hosts[host] = [0, 0]
        nbytes = r.wire_bytes or r.body_bytes
        second = agg.per_second.get(int(r.fetched_at)) if r.fetched_at > 0 else None
        if second is None and r.fetched_at > 0:
            second = agg.per_second[int(r.fetched_at)] = [0, 0, 0]
        if r.error_class:
            agg.failed += 1
            entry[1] += 1
            agg.errors[r.error_class] = agg.errors.get(r.error_class, 0) + 1
            if second is not None:
                second[2] += 1
        else:
            agg.pages += 1
            entry[0] += 1
            if second is not None:
                second[0] += 1
        if second is not None:
            second[1] += nbytes
        agg.bytes += nbytes
        if r.status:
            agg.status[r.status] = agg.status.get(r.status, 0) + 1
        agg.depth[r.depth] = agg.depth.get(r.depth, 0) + 1
        agg.fetcher_pages[r.fetcher_id] = agg.fetcher_pages.get(r.fetcher_id, 0) + 1
        lat["dns"].add(r.dns_s)
        lat["connect"].add(r.connect_s)
        lat["ttfb"].add(r.ttfb_s)
        lat["total"].add(r.total_s)
        if r.serial:
            key = (r.fetcher_id, r.serial)
            batch = agg.batches.get(key)
            if batch is None:
                agg.batches[key] = [1, r.fetched_at]
            else:
                batch[0] += 1
                batch[1] = min(batch[1], r.fetched_at) if r.fetched_at > 0 else batch[1]
    return agg


def timeline_from_rows(rows: Iterable[Mapping[str, Any]]) -> Timeline:
    """Series from stats.jsonl rows (``CrawlStats.tick`` format); rates are deltas / ``dt``."""
    tl = Timeline(source="stats.jsonl")
    start: float | None = None
    for row in rows:
        try:
            t = float(row["t"])
            dt = float(row.get("dt") or 1.0)
        except (KeyError, TypeError, ValueError):
            continue
        dt = dt if dt > 0 else 1.0
        if start is None:
            start = t - dt
        x = round(t - start, 3)
        tl.t.append(x)
        tl.pages_per_s.append(_num(row.get("pages")) / dt)
        tl.bytes_per_s.append(_num(row.get("bytes")) / dt)
        tl.errors_per_s.append(_num(row.get("failed", sum(_counts(row.get("errors")).values()))) / dt)
        queue = row.get("queue")
        tl.queue.append(int(queue) if isinstance(queue, int | float) else None)
        rate = row.get("dns_hit_rate")
        tl.dns_hit_rate.append(float(rate) if isinstance(rate, int | float) else None)
        tl.dns_hit_rate_cum.append(_cum_hit_rate(row.get("dns")))
        fetchers = row.get("fetchers")
        if isinstance(fetchers, Mapping):
            for fid, f in fetchers.items():
                if not isinstance(f, Mapping):
                    continue
                if isinstance(f.get("n_i"), int | float):
                    tl.fetcher_n.setdefault(str(fid), []).append((x, float(f["n_i"])))
                # t_i <= 0 means "no history yet" (S3: n(0) = k), not an infinitely fast fetcher.
                if isinstance(f.get("t_i"), int | float) and f["t_i"] > 0:
                    tl.fetcher_t.setdefault(str(fid), []).append((x, float(f["t_i"])))
    if not tl.t:
        tl.source = "none"
    return tl


def timeline_from_segments(agg: SegmentAgg) -> Timeline:
    """Fallback series from result ``fetched_at`` seconds when stats.jsonl is missing or empty."""
    if not agg.per_second:
        return Timeline()
    first, last = min(agg.per_second), max(agg.per_second)
    tl = Timeline(source="segments")
    for sec in range(first, last + 1):
        pages, nbytes, errors = agg.per_second.get(sec, (0, 0, 0))
        tl.t.append(float(sec - first + 1))
        tl.pages_per_s.append(float(pages))
        tl.bytes_per_s.append(float(nbytes))
        tl.errors_per_s.append(float(errors))
        tl.queue.append(None)
        tl.dns_hit_rate.append(None)
        tl.dns_hit_rate_cum.append(None)
    return tl


def rate_stats(values: list[float], *, trim: float = STEADY_TRIM) -> dict[str, float | int | None]:
    """Flatness of a rate series over its steady part: mean, std, coefficient of variation, percentiles.

    S1 claims a flat bandwidth line; ``cv`` (std / mean) is the number we hold against that claim.
    """
    n = len(values)
    cut = int(n * trim) if n >= 10 else 0
    steady = sorted(values[cut : n - cut] if cut else values)
    if not steady:
        return {"n": 0, "mean": None, "std": None, "cv": None, "p05": None, "p50": None, "p95": None, "max": None}
    mean = sum(steady) / len(steady)
    std = math.sqrt(sum((v - mean) ** 2 for v in steady) / len(steady))
    return {
        "n": len(steady),
        "mean": _r(mean),
        "std": _r(std),
        "cv": _r(std / mean) if mean > 0 else None,
        "p05": _r(_pct(steady, 0.05)),
        "p50": _r(_pct(steady, 0.5)),
        "p95": _r(_pct(steady, 0.95)),
        "max": _r(steady[-1]),
    }


def quota_line(summary: Mapping[str, Any]) -> float | None:
    """The quota line in URLs/s: ``quota_per_s`` as a number, or the sum of a per-service mapping."""
    q = summary.get("quota_per_s")
    if isinstance(q, bool):
        return None
    if isinstance(q, int | float):
        return float(q) if q > 0 else None
    if isinstance(q, Mapping):
        vals = [float(v) for v in q.values() if isinstance(v, int | float) and not isinstance(v, bool)]
        return sum(vals) if vals else None
    return None


def _pct(sorted_values: list[float], q: float) -> float:
    idx = min(int(round(q * (len(sorted_values) - 1))), len(sorted_values) - 1)
    return sorted_values[idx]


def _cum_hit_rate(dns: Any) -> float | None:
    if not isinstance(dns, Mapping):
        return None
    lookups = sum(_num(dns.get(k)) for k in ("hits", "misses", "negative_hits", "inflight_joins"))
    if lookups <= 0:
        return None
    return (_num(dns.get("hits")) + _num(dns.get("negative_hits")) + _num(dns.get("inflight_joins"))) / lookups


def _counts(obj: Any) -> dict[str, float]:
    if not isinstance(obj, Mapping):
        return {}
    return {str(k): _num(v) for k, v in obj.items()}


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _r(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)
