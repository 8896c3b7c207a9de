"""The report page: one static HTML file, inline CSS, no scripts, no external resources.

Images are referenced by relative file name (the PNGs sit next to ``index.html``) or, with
``embed=True``, inlined as data URIs so the single file can be mailed around. Every string that came
from the crawl (hosts, error classes) is HTML-escaped: crawled names are untrusted input.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

_CSS = """
body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1140px;color:#212121;
background:#fff}
h1{font-size:26px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #e0e0e0}
.sub{color:#616161;font-size:13px;margin-bottom:16px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #e0e0e0;border-radius:6px;padding:8px 14px;min-width:120px}
.card .v{font-size:21px;font-weight:bold}.card .k{font-size:12px;color:#616161}
figure{margin:8px 0 18px}figure img{max-width:100%;border:1px solid #eeeeee}
figcaption{font-size:13px;color:#424242}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #e0e0e0;padding:3px 9px;text-align:right}th{background:#fafafa}
td:first-child,th:first-child{text-align:left}
.tables{display:flex;flex-wrap:wrap;gap:28px;align-items:flex-start}
"""


MAX_FETCHER_ROWS = 40  # the JSON has them all


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    out = ["<table><tr>", *(f"<th>{_e(h)}</th>" for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(_fmt(c))}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _img_src(out_dir: Path, name: str, *, embed: bool) -> str:
    if not embed:
        return _e(name)
    data = base64.b64encode((out_dir / name).read_bytes()).decode("ascii")
    return f"data:image/png;base64,{data}"


def render_html(
    report: dict[str, Any],
    plots: Sequence[tuple[str, str, str]],
    out_dir: Path,
    *,
    title: str = "crawlfleet crawl report",
    embed: bool = False,
) -> str:
    """The page for ``report`` (the report.json dict) with ``plots`` as (file, title, caption)."""
    totals = report["totals"]
    rate = report["rate"]["pages_per_s"]
    brate = report["rate"]["bytes_per_s"]
    cards = [
        ("pages fetched", totals["pages"]),
        ("failed", totals["failed"]),
        ("bytes", _human(totals["bytes"])),
        ("hosts", totals["hosts"]),
        ("elapsed", f"{_fmt(report['elapsed_s'])} s" if report.get("elapsed_s") is not None else None),
        ("steady pages/s", rate["mean"]),
        ("steady MiB/s", None if brate["mean"] is None else brate["mean"] / 2**20),
        ("rate CV (S1 flatness)", rate["cv"]),
        ("quota /s", report.get("quota_per_s")),
        ("DNS hit rate", report["dns"].get("hit_rate")),
    ]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<div class='sub'>crawl directory {_e(report['crawl_dir'])} · generated {_e(report['generated_at'])}"
        f" · timeline from {_e(report['rate']['source'])}</div>",
        "<div class='cards'>",
    ]
    for key, value in cards:
        parts.append(
            f"<div class='card'><div class='v'>{_e(_fmt(value))}</div><div class='k'>{_e(key)}</div></div>"
        )
    parts.append("</div>")
    for name, fig_title, caption in plots:
        parts.append(
            f"<h2>{_e(fig_title)}</h2><figure><img src='{_img_src(out_dir, name, embed=embed)}' "
            f"alt='{_e(fig_title)}'><figcaption>{_e(caption)}</figcaption></figure>"
        )
    parts.append("<h2>Tables</h2><div class='tables'>")
    parts.append(
        "<div><b>Top hosts</b>"
        + _table(
            ("host", "pages", "errors"), ((h["host"], h["pages"], h["errors"]) for h in report["hosts_top"])
        )
        + "</div>"
    )
    parts.append(
        "<div><b>Status codes</b>" + _table(("status", "results"), report["status_mix"].items()) + "</div>"
    )
    parts.append(
        "<div><b>Errors by class</b>"
        + _table(("class", "results"), report["errors_by_class"].items())
        + "</div>"
    )
    lat_rows = (
        (phase, h["n"], _ms(h["p50_s"]), _ms(h["p90_s"]), _ms(h["p99_s"]))
        for phase, h in report["latency"]["phases"].items()
    )
    parts.append("<div><b>Latency</b>" + _table(("phase", "n", "p50", "p90", "p99"), lat_rows) + "</div>")
    node_rows = (
        (name, n["fetchers"], n["results"], n["batches"], n["mean_batch"], n["n_i_mean"], _ms(n["t_i_mean"]),
         *(_beat(n["heartbeat"])))
        for name, n in report.get("nodes", {}).items()
    )  # fmt: skip
    parts.append(
        "<div><b>Fetch nodes</b>"
        + _table(
            (
                "node",
                "fetchers",
                "results",
                "batches",
                "mean batch",
                "mean n_i",
                "mean t_i",
                "successes",
                "failures",
                "rate/s",
                "free slots",
            ),
            node_rows,
        )  # fmt: skip
        + "</div>"
    )
    fetchers = sorted(report["fetchers"].items(), key=lambda kv: (-kv[1]["results"], kv[0]))[
        :MAX_FETCHER_ROWS
    ]
    fetch_rows = (
        (fid, f["results"], f["batches"], f["mean_batch"], f["n_i_last"], _ms(f["t_i_last"]))
        for fid, f in fetchers
    )
    parts.append(
        "<div><b>Virtual fetchers (busiest)</b>"
        + _table(("fetcher", "results", "batches", "mean batch", "last n_i", "last t_i"), fetch_rows)
        + "</div>"
    )
    polite = report.get("politeness") or {}
    if polite.get("hosts"):
        parts.append(_politeness(polite))
    dup = report.get("duplicates")
    if dup:
        parts.append(_duplicates(dup))
    failed = report.get("parse_failed") or []
    if failed:
        parts.append(f"<div><b>Pages kept without links</b> ({len(failed)}: parsing them killed parser processes)"
                     + _table(("URL", "why"), ((f["url"], f["error"].removeprefix("parse_failed: ")) for f in failed))
                     + "</div>")  # fmt: skip
    if report.get("bad_lines"):
        parts.append(
            "<div><b>Skipped lines</b>" + _table(("file", "lines"), report["bad_lines"].items()) + "</div>"
        )
    parts.append("</div><p class='sub'>Figures as JSON: report.json in this directory.</p></body></html>")
    return "\n".join(parts)


MAX_DUP_ROWS = 20
MAX_POLITE_ROWS = 30


def _politeness(p: dict[str, Any]) -> str:
    """Each host's politeness as the server felt it (the busiest hosts), and robots.txt changes."""
    t = p["totals"]
    rows = []
    changes = []
    for host, h in list(p["hosts"].items())[:MAX_POLITE_ROWS]:
        back = h.get("backoff_after_429_503_s")
        rows.append((host, h["requests"], h["robots_fetches"], h["crawl_delay_s"], _ms(h["min_gap_s"]),
                     _ms(h["p5_gap_s"]), h["gaps_below_delay"], h["status_429"], h["status_503"],
                     _ms(back["min"]) if back else ""))  # fmt: skip
        changes += [(host, c["at"], " ".join(c["changed"]), c["crawl_delay"]) for c in h["robots_changes"]]
    head = (f"<div><b>Politeness as the servers felt it</b> ({t['requests']} requests to {t['hosts']} hosts; "
            f"host delay {p['min_host_delay_s']} s; {t['gaps_below_delay']} gaps shorter than the delay owed; "
            f"{t['status_429']} 429s, {t['status_503']} 503s; {t['robots_fetches']} robots.txt requests, "
            f"{t['robots_changes']} changes)")  # fmt: skip
    out = head + _table(("host", "requests", "robots.txt", "Crawl-delay", "least gap", "5% gap", "gaps short",
                         "429", "503", "least back-off"), rows)  # fmt: skip
    if changes:
        out += _table(("host", "robots.txt changed at", "directives", "Crawl-delay now"), changes)
    return out + "</div>"


def _duplicates(dup: dict[str, Any]) -> str:
    """The duplicate-content table: the largest groups of each kind, a count and the URLs (abridged)."""
    rows = []
    for kind in ("exact", "near"):
        for group in (dup.get(kind) or [])[:MAX_DUP_ROWS]:
            urls = [str(u) for u in group]
            shown = " ".join(urls[:5]) + (f" (+{len(urls) - 5})" if len(urls) > 5 else "")
            rows.append((kind, len(urls), shown))
    head = (f"<div><b>Duplicate content</b> ({dup.get('pages')} pages; {dup.get('exact_groups')} exact groups, "
            f"{dup.get('near_groups')} near within {dup.get('near_bits')} bits)")  # fmt: skip
    return head + _table(("kind", "URLs", "which"), rows) + "</div>"


def _human(n: Any) -> str:
    if not isinstance(n, int | float):
        return "n/a"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _ms(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "n/a"
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _beat(hb: dict[str, Any] | None) -> tuple[Any, Any, Any, Any]:
    """A node's last S1 heartbeat: successes, failures, rate, free slots (blank when not recorded)."""
    if not hb:
        return ("", "", "", "")
    return (hb.get("successes", ""), hb.get("failures", ""), hb.get("rate", ""), hb.get("free_slots", ""))
