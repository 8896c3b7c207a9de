"""The dispatcher's HTML status page (``/status``): the figures of ``MetricsServer.status()``, escaped,
script-free, refreshed by the browser every 2 seconds."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

_STATUS_CSS = (
    "body{font-family:sans-serif;margin:20px;color:#212121}table{border-collapse:collapse;font-size:13px}"
    "td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f5f5f5}"
    "td:first-child{text-align:left}.dead{color:#c62828;font-weight:bold}.live{color:#2e7d32}"
    ".kv span{display:inline-block;margin:0 18px 8px 0}.kv b{font-size:18px}"
)
_COLUMNS = (
    "fetcher", "address", "live", "heartbeat_age_s", "n_i", "t_i", "p", "q", "r", "batches_out",
    "successes", "failures", "deaths", "results",
)


def render_status(st: Mapping[str, Any]) -> str:
    """The /status page (escaped, script-free, refreshes every 2 s)."""
    e = html.escape
    rates = st["rates"]
    head = [
        ("pages/s", f"{rates['pages_per_s']:.1f}"),
        ("MiB/s", f"{rates['bytes_per_s'] / 2**20:.2f}"),
        ("errors/s", f"{rates['errors_per_s']:.1f}"),
        ("pages", st["pages"]),
        ("failed", st["failed"]),
        ("queue", st["queue"]),
        ("batches in flight", st["batches_in_flight"] if st["batches_in_flight"] is not None else "n/a"),
        ("URLs in flight", st["urls_in_flight"] if st["urls_in_flight"] is not None else "n/a"),
        ("quota refusals", st["quota_refusals"]),
        ("robots blocked", st["robots_blocked"]),
        ("DNS hit rate", "n/a" if st["dns_hit_rate"] is None else f"{st['dns_hit_rate']:.3f}"),
        ("uptime s", st["uptime_s"]),
    ]
    out = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><meta http-equiv='refresh' content='2'>",
        f"<title>crawlfleet status</title><style>{_STATUS_CSS}</style></head><body><h1>crawlfleet dispatcher</h1>",
        "<div class='kv'>",
        *(f"<span><b>{e(str(v))}</b> {e(k)}</span>" for k, v in head),
        f"</div><h2>Fetchers ({len(st['fetchers'])})</h2><table><tr>",
        *(f"<th>{e(c)}</th>" for c in _COLUMNS),
        "</tr>",
    ]
    for row in st["fetchers"]:
        cells = []
        for col in _COLUMNS:
            value = row.get(col)
            if col == "live":
                cells.append(f"<td class='{'live' if value else 'dead'}'>{'live' if value else 'DEAD'}</td>")
                continue
            text = "" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
            cells.append(f"<td>{e(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table><p><a href='/metrics'>/metrics</a> · <a href='/status.json'>/status.json</a></p></body></html>")
    return "".join(out)
