"""Build the report for a crawl directory: PNG plots, ``index.html`` and ``report.json``.

``build_report(crawl_dir, out_dir)`` streams ``stats.jsonl`` and the result segments once each (see
``data.py``), folds them (``aggregate.py``), draws every plot (``plots.py``) and writes the page
(``html.py``). The timeline comes from stats.jsonl; when it is missing or empty the report falls back
to per-second counts from the results' ``fetched_at``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.report.aggregate import (
    BOUNDS_S,
    ReportStats,
    Timeline,
    aggregate_segments,
    quota_line,
    rate_stats,
    timeline_from_rows,
    timeline_from_segments,
)
from pipeline.report.data import (
    ReadErrors,
    SegmentRecord,
    iter_segment_records,
    iter_stats_rows,
    read_duplicates,
    read_parse_failed,
    read_settings_section,
    read_summary,
)
from pipeline.report.html import render_html
from pipeline.report.nodes import nodes_table
from pipeline.report.plots import PLOTS, TOP_HOSTS
from pipeline.report.politeness import PolitenessFold, politeness_json

HTML_FILE = "index.html"
JSON_FILE = "report.json"


@dataclass(slots=True)
class ReportResult:
    out_dir: Path
    html: Path
    json: Path
    plots: list[Path]


def load_stats(crawl_dir: Path) -> ReportStats:
    """Read and fold a crawl directory. Raises FileNotFoundError when it is not a directory."""
    if not crawl_dir.is_dir():
        raise FileNotFoundError(f"not a crawl directory: {crawl_dir}")
    errors = ReadErrors()
    summary = read_summary(crawl_dir)
    timeline = timeline_from_rows(iter_stats_rows(crawl_dir, errors))
    polite = PolitenessFold()

    def records() -> Iterator[SegmentRecord]:  # one pass over the segments feeds both folds
        for rec in iter_segment_records(crawl_dir, errors):
            polite.add(rec.url, rec.sent, rec.robots)
            yield rec

    segments = aggregate_segments(records())
    if not timeline.t:
        timeline = timeline_from_segments(segments)
    return ReportStats(
        summary=summary,
        timeline=timeline,
        segments=segments,
        quota_per_s=quota_line(summary),
        bad_lines=dict(errors.bad_lines),
        politeness=politeness_json(polite.hosts, read_settings_section(crawl_dir, "politeness")),
    )


def report_json(stats: ReportStats, crawl_dir: Path, *, now: float | None = None) -> dict[str, Any]:
    """Every figure of the report as plain JSON (also what the HTML page shows)."""
    seg = stats.segments
    tl = stats.timeline
    hosts = sorted(seg.hosts.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))[:TOP_HOSTS]
    batches_by: dict[str, list[int]] = {}
    for (fid, _serial), (n, _at) in seg.batches.items():
        batches_by.setdefault(fid, []).append(int(n))
    fetcher_ids = sorted(set(seg.fetcher_pages) | set(batches_by) | set(tl.fetcher_n) | set(tl.fetcher_t))
    fetchers = {}
    for fid in fetcher_ids:
        sizes = batches_by.get(fid, [])
        fetchers[fid] = {
            "results": seg.fetcher_pages.get(fid, 0),
            "batches": len(sizes),
            "mean_batch": round(sum(sizes) / len(sizes), 2) if sizes else None,
            "n_i_last": tl.fetcher_n[fid][-1][1] if tl.fetcher_n.get(fid) else None,
            "t_i_last": tl.fetcher_t[fid][-1][1] if tl.fetcher_t.get(fid) else None,
        }
    cum = [r for r in tl.dns_hit_rate_cum if r is not None]
    summary = stats.summary
    generated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    return {
        "crawl_dir": str(crawl_dir),
        "generated_at": generated,
        "summary": summary,
        "elapsed_s": summary.get("elapsed_s", tl.t[-1] if tl.t else None),
        "totals": {
            "results": seg.records,
            "pages": seg.pages,
            "failed": seg.failed,
            "bytes": seg.bytes,
            "hosts": len(seg.hosts),
        },
        "quota_per_s": stats.quota_per_s,
        "rate": {
            "source": tl.source,
            "pages_per_s": rate_stats(tl.pages_per_s),
            "bytes_per_s": rate_stats(tl.bytes_per_s),
        },
        "timeline": _timeline_json(tl),
        "fetchers": fetchers,
        "nodes": nodes_table(fetchers, summary),
        "hosts_top": [{"host": h, "pages": v[0], "errors": v[1]} for h, v in hosts],
        "status_mix": {str(k): v for k, v in sorted(seg.status.items())},
        "errors_by_class": dict(sorted(seg.errors.items(), key=lambda kv: (-kv[1], kv[0]))),
        "depth": {str(k): v for k, v in sorted(seg.depth.items())},
        "latency": {
            "bounds_s": [round(b, 7) for b in BOUNDS_S],
            "phases": {phase: hist.to_json() for phase, hist in seg.latency.items()},
        },
        "dns": {"hit_rate": round(cum[-1], 4) if cum else None, "counters": summary.get("dns", {})},
        "bad_lines": stats.bad_lines,
        # Which URLs share content (exact digest, near: simhash), when `crawlfleet duplicates --write` ran.
        "duplicates": read_duplicates(crawl_dir),
        # Pages kept without their links: parsing them killed parser processes (pipeline/links/guard.py).
        "parse_failed": read_parse_failed(crawl_dir),
        # Each host's politeness as the server felt it (pipeline/report/politeness.py).
        "politeness": stats.politeness,
    }


def _timeline_json(tl: Timeline) -> dict[str, Any]:
    return {
        "t": tl.t,
        "pages_per_s": [round(v, 3) for v in tl.pages_per_s],
        "bytes_per_s": [round(v, 1) for v in tl.bytes_per_s],
        "errors_per_s": [round(v, 3) for v in tl.errors_per_s],
        "queue": tl.queue,
        "dns_hit_rate": tl.dns_hit_rate,
        "fetcher_n": {fid: [list(p) for p in pts] for fid, pts in tl.fetcher_n.items()},
        "fetcher_t": {fid: [list(p) for p in pts] for fid, pts in tl.fetcher_t.items()},
    }


def build_report(
    crawl_dir: Path, out_dir: Path, *, embed: bool = False, title: str | None = None
) -> ReportResult:
    """Write the plots, ``index.html`` and ``report.json`` under ``out_dir`` (created if needed)."""
    crawl_dir = Path(crawl_dir)
    out_dir = Path(out_dir)
    stats = load_stats(crawl_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_paths = []
    for name, _title, _caption, draw in PLOTS:
        path = out_dir / name
        draw(stats, path)
        plot_paths.append(path)
    data = report_json(stats, crawl_dir.resolve())
    json_path = out_dir / JSON_FILE
    json_path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    page = render_html(
        data,
        [(name, t, caption) for name, t, caption, _ in PLOTS],
        out_dir,
        title=title or f"crawlfleet report: {crawl_dir.resolve().name}",
        embed=embed,
    )
    html_path = out_dir / HTML_FILE
    html_path.write_text(page, encoding="utf-8")
    return ReportResult(out_dir=out_dir, html=html_path, json=json_path, plots=plot_paths)
