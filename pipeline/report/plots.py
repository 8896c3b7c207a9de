"""The report's PNG plots, drawn with matplotlib's Agg canvas (no pyplot, no display, no global state).

Each ``plot_*`` function writes one PNG and always writes it: a panel with no data says so, so the
HTML page has the same figures for every crawl. ``PLOTS`` lists them in page order.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from pipeline.report.aggregate import BOUNDS_S, PHASES, ReportStats, rate_stats
from pipeline.report.nodes import node_of, series_by_node

TOP_HOSTS = 20
MAX_LINES = 12  # more fetchers than this are drawn as a grey bundle with their median
DPI = 100
_COLORS = {"2": "#2e7d32", "3": "#1565c0", "4": "#ef6c00", "5": "#c62828"}
_PHASE_COLORS = {"dns": "#6a1b9a", "connect": "#00838f", "ttfb": "#ef6c00", "total": "#37474f"}


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})


def _no_data(ax: Axes, text: str = "no data recorded") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#757575", fontsize=12)
    ax.set_xticks([])
    ax.set_yticks([])


def _si(value: float, _pos: object = None) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= div:
            return f"{value / div:.3g}{unit}"
    return f"{value:.3g}"


def plot_rate(stats: ReportStats, path: Path) -> None:
    """The S1 picture: pages/s and bytes/s over time (flat is good), the quota line, the queue."""
    tl = stats.timeline
    fig = _figure(11, 8)
    ax_p, ax_b, ax_q = fig.subplots(3, 1, sharex=True, height_ratios=[3, 3, 2])
    if not tl.t:
        for ax in (ax_p, ax_b, ax_q):
            _no_data(ax)
        _save(fig, path)
        return
    flat = rate_stats(tl.pages_per_s)
    ax_p.plot(tl.t, tl.pages_per_s, color="#1565c0", lw=1.2, label="pages/s")
    if any(tl.errors_per_s):
        ax_p.plot(tl.t, tl.errors_per_s, color="#c62828", lw=0.8, label="errors/s")
    if flat["mean"] is not None:
        ax_p.axhline(float(flat["mean"]), color="#1565c0", ls=":", lw=1, label=f"steady mean {flat['mean']:.1f}")
    if stats.quota_per_s is not None:
        ax_p.axhline(stats.quota_per_s, color="#c62828", ls="--", lw=1.5, label=f"quota {stats.quota_per_s:g}/s")
    cv = flat["cv"]
    ax_p.set_title(
        "Fetch rate over time" + (f" — steady CV {cv:.3f} (std/mean; 0 = perfectly flat)" if cv is not None else "")
    )
    ax_p.set_ylabel("pages / s")
    ax_p.set_ylim(bottom=0)
    ax_p.legend(loc="lower right", fontsize=8)
    ax_b.plot(tl.t, [b / 2**20 for b in tl.bytes_per_s], color="#2e7d32", lw=1.2)
    bflat = rate_stats(tl.bytes_per_s)
    ax_b.set_title(
        "Bandwidth over time" + (f" — steady CV {bflat['cv']:.3f}" if bflat["cv"] is not None else "")
    )
    ax_b.set_ylabel("MiB / s")
    ax_b.set_ylim(bottom=0)
    queue = [(x, q) for x, q in zip(tl.t, tl.queue, strict=True) if q is not None]
    if queue:
        ax_q.plot([x for x, _ in queue], [q for _, q in queue], color="#6d4c41", lw=1.2)
        ax_q.set_ylim(bottom=0)
        ax_q.yaxis.set_major_formatter(FuncFormatter(_si))
    else:
        _no_data(ax_q, "queue size not recorded")
    ax_q.set_title("Pending queue")
    ax_q.set_ylabel("URLs")
    ax_q.set_xlabel(f"seconds since start (source: {tl.source})")
    for ax in (ax_p, ax_b, ax_q):
        ax.grid(alpha=0.3)
    _save(fig, path)


def plot_hosts(stats: ReportStats, path: Path) -> None:
    """Top hosts by results: pages and errors stacked."""
    hosts = sorted(stats.segments.hosts.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))[:TOP_HOSTS]
    fig = _figure(11, max(3.0, 0.3 * len(hosts) + 1.5))
    ax = fig.subplots()
    if not hosts:
        _no_data(ax)
    else:
        names = [h for h, _ in hosts][::-1]
        pages = [v[0] for _, v in hosts][::-1]
        errors = [v[1] for _, v in hosts][::-1]
        ax.barh(names, pages, color="#1565c0", label="pages")
        ax.barh(names, errors, left=pages, color="#c62828", label="errors")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="y", labelsize=8)
    ax.set_title(f"Per-host load (top {len(hosts)} of {len(stats.segments.hosts)} hosts)")
    ax.set_xlabel("results")
    _save(fig, path)


def plot_status(stats: ReportStats, path: Path) -> None:
    """HTTP status-code mix and transport errors by class."""
    fig = _figure(11, 4)
    ax_s, ax_e = fig.subplots(1, 2, width_ratios=[3, 2])
    status = sorted(stats.segments.status.items())
    if status:
        labels = [str(code) for code, _ in status]
        ax_s.bar(labels, [n for _, n in status], color=[_COLORS.get(lbl[0], "#757575") for lbl in labels])
        ax_s.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax_s.grid(axis="y", alpha=0.3)
    else:
        _no_data(ax_s, "no HTTP responses")
    ax_s.set_title("Status-code mix")
    errors = sorted(stats.segments.errors.items(), key=lambda kv: (-kv[1], kv[0]))[:12]
    if errors:
        ax_e.barh([e for e, _ in errors][::-1], [n for _, n in errors][::-1], color="#c62828")
        ax_e.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax_e.tick_params(axis="y", labelsize=8)
        ax_e.grid(axis="x", alpha=0.3)
    else:
        _no_data(ax_e, "no fetch errors")
    ax_e.set_title("Errors by class")
    _save(fig, path)


def plot_latency(stats: ReportStats, path: Path) -> None:
    """Latency distributions per phase (DNS, connect, TTFB, total) on a log time axis."""
    fig = _figure(11, 4.5)
    ax = fig.subplots()
    edges = [BOUNDS_S[0] / 10**0.1, *BOUNDS_S]
    drawn = False
    for phase in PHASES:
        hist = stats.segments.latency[phase]
        if hist.n == 0:
            continue
        drawn = True
        counts = hist.counts[: len(BOUNDS_S)]
        frac = [c / hist.n for c in counts]
        p50, p95 = hist.percentile(0.5), hist.percentile(0.95)
        label = f"{phase}: n={hist.n}, p50 {_ms(p50)}, p95 {_ms(p95)}"
        ax.stairs(frac, edges, color=_PHASE_COLORS[phase], lw=1.5, label=label)
    if drawn:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: _ms(v)))
        ax.set_xlabel("latency")
        ax.set_ylabel("fraction of measured requests")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    else:
        _no_data(ax, "no timings recorded")
    ax.set_title("Latency distribution (phases not measured, e.g. reused connections, are left out)")
    _save(fig, path)


def plot_dns(stats: ReportStats, path: Path) -> None:
    """DNS cache hit rate over time: per interval and cumulative."""
    tl = stats.timeline
    fig = _figure(11, 3.5)
    ax = fig.subplots()
    inst = [(x, r) for x, r in zip(tl.t, tl.dns_hit_rate, strict=True) if r is not None]
    cum = [(x, r) for x, r in zip(tl.t, tl.dns_hit_rate_cum, strict=True) if r is not None]
    if inst or cum:
        if inst:
            ax.plot([x for x, _ in inst], [r for _, r in inst], ".", ms=3, color="#6a1b9a", label="per interval")
        if cum:
            ax.plot([x for x, _ in cum], [r for _, r in cum], color="#6a1b9a", lw=1.5, label="cumulative")
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("hit rate")
        ax.set_xlabel("seconds since start")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
    else:
        _no_data(ax, "no DNS cache counters recorded")
    ax.set_title("DNS cache hit rate (hits + negative hits + joined in-flight lookups) / lookups")
    _save(fig, path)


def plot_fetchers(stats: ReportStats, path: Path) -> None:
    """S3: batch size n_i and time per page t_i per fetcher over time, and the batch sizes actually seen."""
    tl = stats.timeline
    fig = _figure(11, 8)
    ax_n, ax_t, ax_b = fig.subplots(3, 1, sharex=False)
    # Per node (its virtual fetchers' mean), not per virtual fetcher: a node is what an engineer runs.
    _series(ax_n, series_by_node(tl.fetcher_n), "batch size n_i = k·avg/t_i (S3), mean per node", "URLs")
    _series(ax_t, series_by_node(tl.fetcher_t), "running mean time per page t_i, per node", "seconds",
            fmt=lambda v, _p: _ms(v))  # fmt: skip
    batches = stats.segments.batches
    if batches:
        first = min((b[1] for b in batches.values() if b[1] > 0), default=0.0)
        by_fetcher: dict[str, list[tuple[float, float]]] = {}
        for (fid, _serial), (n, at) in batches.items():
            by_fetcher.setdefault(node_of(fid or "(unnamed)"), []).append((at - first if at > 0 else 0.0, n))
        many = len(by_fetcher) > MAX_LINES
        for fid, pts in sorted(by_fetcher.items()):
            pts.sort()
            style = {"color": "#1565c0", "alpha": 0.6} if many else {"label": fid}
            ax_b.plot([x for x, _ in pts], [n for _, n in pts], ".", ms=4, **style)
        ax_b.set_ylim(bottom=0)
        ax_b.set_xlabel("seconds since first result")
        if not many:
            _legend(ax_b, len(by_fetcher))
        ax_b.grid(alpha=0.3)
    else:
        _no_data(ax_b, "no batch serials in the stored results")
    ax_b.set_title("URLs per completed batch, per node (from stored results)")
    ax_b.set_ylabel("URLs")
    _save(fig, path)


def plot_depth(stats: ReportStats, path: Path) -> None:
    depth = sorted(stats.segments.depth.items())
    fig = _figure(11, 3.5)
    ax = fig.subplots()
    if depth:
        ax.bar([str(d) for d, _ in depth], [n for _, n in depth], color="#00838f")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="y", alpha=0.3)
        ax.set_xlabel("link depth from the seeds")
        ax.set_ylabel("results")
    else:
        _no_data(ax)
    ax.set_title("Depth distribution")
    _save(fig, path)


def _series(
    ax: Axes, series: dict[str, list[tuple[float, float]]], title: str, ylabel: str, fmt: Callable | None = None
) -> None:
    ax.set_title(title)
    if not series:
        _no_data(ax, "not recorded (fleet dispatcher only)")
        return
    if len(series) <= MAX_LINES:
        for fid, pts in sorted(series.items()):
            ax.plot([x for x, _ in pts], [v for _, v in pts], lw=1.2, label=fid)
    else:
        # Many (virtual) fetchers: thin grey lines for each, the median across fetchers in bold.
        by_x: dict[float, list[float]] = {}
        for pts in series.values():
            ax.plot([x for x, _ in pts], [v for _, v in pts], lw=0.6, color="#9e9e9e", alpha=0.5)
            for x, v in pts:
                by_x.setdefault(x, []).append(v)
        xs = sorted(by_x)
        ax.plot(xs, [statistics.median(by_x[x]) for x in xs], lw=2, color="#1565c0",
                label=f"median of {len(series)} fetchers")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since start")
    if fmt is not None:
        ax.yaxis.set_major_formatter(FuncFormatter(fmt))
    _legend(ax, len(series))
    ax.grid(alpha=0.3)


def _legend(ax: Axes, n: int) -> None:
    ax.legend(fontsize=8, loc="upper right", ncols=min(n, 4))


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    return f"{seconds:.3g} s"


# (file name, title, caption, function), in page order.
PLOTS: tuple[tuple[str, str, str, Callable[[ReportStats, Path], None]], ...] = (
    ("rate.png", "Rate and bandwidth", "Pages/s, bytes/s and queue size per second. S1 claims this is a "
     "flat line; the steady CV (ramp-up and drain excluded) measures how flat.", plot_rate),
    ("fetchers.png", "Fetchers (S3)", "Batch size n_i and time per page t_i per fetcher, and the size of "
     "each completed batch.", plot_fetchers),
    ("hosts.png", "Per-host load", "Pages and errors for the busiest hosts.", plot_hosts),
    ("status.png", "Status codes and errors", "HTTP status mix and fetch errors by class.", plot_status),
    ("latency.png", "Latency", "Distribution of DNS, connect, time-to-first-byte and total time.", plot_latency),
    ("dns.png", "DNS cache", "Hit rate of the DNS cache per interval and cumulative.", plot_dns),
    ("depth.png", "Depth", "Results per link depth.", plot_depth),
)
