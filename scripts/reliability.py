#!/usr/bin/env python3
"""Write RELIABILITY.md from the suite's recorded results (var/reliability/results.jsonl).

    .venv/bin/python scripts/reliability.py [--results PATH] [--out RELIABILITY.md]

Nothing in the report is typed by hand: the fault table, the known bugs and the hostile-input list
all come from records the tests wrote (pipeline.harness.faults.results). For each group (a fault kind, a
hostile input) the records of the latest run that has any are shown.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.harness.faults import results  # noqa: E402

RECOVERY = {
    "crawler": "first request of the resumed (or continued) crawler",
    "unbound": "first request after unbound is back",
    "worker": "the node's batches re-issued (or the node back, if it held none)",
    "dispatcher": "first batch issued by the resumed (or continued) dispatcher",
    "rabbitmq": "first batch completed through the restarted (or continued) broker",
    "thrift": "first batch completed after the Thrift server is back",
    "jobs": "first round finished by the restarted driver",
    "links": "first links report of the restarted `crawlfleet links` (its killed round run again)",
    "hbase": "first batch completed after the HBase data process (master, region server, ZooKeeper) is back",
    "parser": "first result prepared by the replacement parse process",
    "fetcher": "first request for a URL the killed fetch process sent back (kill), SIGCONT (stop)",
}
ORDER = ["crawler", "parser", "fetcher", "worker", "dispatcher", "rabbitmq", "thrift", "hbase", "unbound", "jobs", "links"]


def latest(records: Iterable[dict[str, Any]], key: Any) -> dict[Any, list[dict[str, Any]]]:
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[key(r)].append(r)
    out = {}
    for k, rs in groups.items():
        run = max(r["run"] for r in rs)
        out[k] = [r for r in rs if r["run"] == run]
    return out


def fmt_s(values: list[float | None]) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "–"
    if len(vals) == 1:
        return f"{vals[0]:.1f}"
    return f"{statistics.median(vals):.1f} (max {max(vals):.1f})"


def fault_section(recs: list[dict[str, Any]]) -> list[str]:
    groups = latest(recs, lambda r: (r["component"], r["action"], r["mode"]))
    keys = sorted(groups, key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 99, k[1], k[2]))
    lines = [
        "| component | fault | mode | trials | lost | duplicated | of which known causes | in flight at fault: repeated / total "
        "| recovery s, median (max) | trial wall s | run |",
        "|---|---|---|---:|---:|---:|---|---:|---|---:|---|",
    ]
    for k in keys:
        rs = groups[k]
        causes: dict[str, int] = defaultdict(int)
        for r in rs:
            for c, n in (r.get("duplicated_causes") or {}).items():
                causes[c] += n
        cause_txt = ", ".join(f"{c} {n}" for c, n in sorted(causes.items())) or "–"
        fault = {"kill": "SIGKILL + restart", "stop": "SIGSTOP + SIGCONT"}.get(k[1], k[1])
        lines.append(
            f"| {k[0]} | {fault} | {k[2]} | {len(rs)} | {sum(r['lost'] for r in rs)} | {sum(r['duplicated'] for r in rs)} "
            f"| {cause_txt} | {sum(r['in_flight_repeats'] for r in rs)} / {sum(r['in_flight_at_fault'] for r in rs)} "
            f"| {fmt_s([r.get('recovery_s') for r in rs])} | {fmt_s([r.get('wall_s') for r in rs])} | {rs[0]['run']} |"
        )
    lines += ["", "Per trial (seed: fault after N requests, pause s -> lost / duplicated / in-flight repeats / recovery s):", ""]
    for k in keys:
        parts = []
        for r in sorted(groups[k], key=lambda r: r["seed"]):
            where = r.get("fault_after_requests", r.get("fault_after_rounds"))
            parts.append(f"seed {r['seed']}: @{where}, {r['down_s']}s -> {r['lost']} / {r['duplicated']} / "
                         f"{r['in_flight_repeats']} / {r.get('recovery_s')}")
        lines.append(f"- {k[0]} {k[1]} ({k[2]}): " + "; ".join(parts))
    lines += ["", "Recovery time is measured from the fault to:", ""]
    lines += [f"- {c}: {RECOVERY[c]}" for c in ORDER if any(k[0] == c for k in keys)]
    return lines


def pin_state(where: str, test: str) -> str:
    """'open' while the test still carries an xfail marker, 'fixed' once it is a plain regression test,
    'gone' when the test no longer exists."""
    path = ROOT / where
    if not path.exists():
        return "gone"
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"def {test}("):
            j = i - 1
            while j >= 0 and lines[j].startswith("@"):
                if "xfail" in lines[j]:
                    return "open"
                j -= 1
            return "fixed"
    return "gone"


def xfail_section(recs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(open bugs, bugs fixed since the suite found them), from the recorded pins and the test sources."""
    groups = latest(recs, lambda r: r["test"])
    open_, fixed = [], []
    for test in sorted(groups, key=lambda t: (groups[t][-1]["component"], t)):
        r = groups[test][-1]
        where = r.get("file", "tests/faults/test_faults_known_bugs.py")
        state = pin_state(where, test)
        line = f"- **{r['component']}** — `{where}::{test}`: {r['reason']}"
        if state == "open":
            open_.append(line)
        elif state == "fixed":
            fixed.append(f"- **{r['component']}** — `{where}::{test}` (now a regression test)")
    return open_, fixed


def hostile_section(recs: list[dict[str, Any]]) -> list[str]:
    # Per mode, only the inputs of that mode's latest run (inputs renamed or dropped since do not linger).
    last_run: dict[str, str] = {}
    for r in recs:
        last_run[r["mode"]] = max(last_run.get(r["mode"], ""), r["run"])
    groups = latest([r for r in recs if r["run"] == last_run[r["mode"]]], lambda r: (r["mode"], r["input"]))
    lines = ["| mode | input | outcome | error class | crawl went on | peak RSS MB | note |", "|---|---|---|---|---|---:|---|"]
    for k in sorted(groups):
        r = groups[k][-1]
        rss = r.get("peak_rss_mb")
        lines.append(f"| {k[0]} | `{k[1]}` | {r.get('outcome', '')} | {r.get('error_class') or '–'} | "
                     f"{'yes' if r.get('crawl_ok') else 'NO'} | {rss if rss is not None else '–'} | {r.get('note', '')} |")
    return lines


def soak_section(paths: list[Path]) -> list[str]:
    """One row per soak run (``crawlfleet bench soak`` records, one JSON line per trial)."""
    rows = ["| run | file | minutes | trials | components | lost | duplicated | excused repeats (by cause) | harness errors |",
            "|---|---|---:|---:|---|---:|---:|---|---:|"]  # fmt: skip
    for path in paths:
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        trials = [r for r in recs if r.get("type") == "fault"]
        if not trials:
            continue
        first = min(r["t"] - r.get("wall_s", 0.0) for r in trials)
        minutes = (max(r["t"] for r in trials) - first) / 60
        causes: dict[str, int] = {}
        for r in trials:
            for cause, n in (r.get("excused") or {}).items():
                causes[cause] = causes.get(cause, 0) + int(n)
        comps = sorted({r["component"] for r in trials})
        errors = sum(1 for r in recs if r.get("type") == "harness_error" or r.get("error"))
        rows.append(f"| {trials[0].get('run', '?')} | `{path.name}` | {minutes:.0f} | {len(trials)} | {', '.join(comps)} "
                    f"| {sum(r['lost'] for r in trials)} | {sum(r['duplicated'] for r in trials)} "
                    f"| {sum(causes.values())} ({', '.join(f'{k} {v}' for k, v in sorted(causes.items())) or '-'}) "
                    f"| {errors} |")  # fmt: skip
    return rows


def render(path: Path, soak: list[Path] | None = None) -> str:
    recs = list(results.read(path))
    faults = [r for r in recs if r.get("type") == "fault"]
    xfails = [r for r in recs if r.get("type") == "xfail"]
    hostile = [r for r in recs if r.get("type") == "hostile"]
    open_bugs, fixed_bugs = xfail_section(xfails)
    machines = {r["machine"].get("cpu", "?"): r["machine"].get("nproc", "?") for r in recs if r.get("machine")}
    out = [
        "# Reliability",
        "",
        "Generated by `scripts/reliability.py` from the records the test suite writes to "
        "`var/reliability/results.jsonl` (tests/faults, tests/integration/test_hostile_*.py); not typed by hand. "
        "Regenerate: `make test` writes var/reliability/RELIABILITY.md at the end of the faults tier; publish it with `.venv/bin/python scripts/reliability.py --out RELIABILITY.md`.",
        "",
        "Machine: " + "; ".join(f"{cpu}, {n} cores" for cpu, n in machines.items()) + ".",
        "",
        "## Faults",
        "",
        "Each trial crawls the testbed (8 hosts x 25 pages, 212 pages of ground truth, about 250 requests), strikes "
        "one component once a seeded share of the expected requests has reached the testbed, brings it back after a "
        "seeded pause, and lets the crawl finish. Judged from the testbed's access log and the store, never from the "
        "crawler's counters: **lost** = ground-truth pages not stored; **duplicated** = URLs fetched twice that were "
        "not in flight at the fault (a 5xx retried by the fetcher is one fetch; a URL journaled before the fault and "
        "asked for after it is always a duplicate); **in flight at fault** = requests the server had received whose "
        "result the crawl had not journaled (received: logged before the fault, or up to 0.2 s after it, because the "
        "testbed logs a request when its loop gets to it; after a SIGKILL nobody can know they were served, so fetching them again "
        "is the correct recovery: reported apart, not hidden). For the job driver, lost = URLs missing from the crawl "
        "db against a run without a fault, duplicated = URLs whose in-link count is above it.",
        "",
        *fault_section(faults),
        "",
        "## Known bugs found by the suite",
        "",
        "Open: pinned by xfail tests (strict where the failure is deterministic). Duplicates with a known cause are "
        "counted in the fault table under *known causes*: `expired_answered` (URLs answered before their batch "
        "expired, fetched again with the re-issued batch) and `expired_unanswered` (the holder of an expired batch "
        "was alive after all, e.g. a stopped worker, and finished it while the re-issued copy ran elsewhere).",
        "",
        *(open_bugs or ["- none open"]),
        "",
        "Found by the suite and fixed since (their tests now guard against a regression):",
        "",
        *(fixed_bugs or ["- none yet"]),
        "",
        "## Hostile inputs",
        "",
        "Every input must end as a clean, recorded outcome for its URL (never `internal_error`), the crawl must not "
        "crash and must still fetch the rest of the web; peak RSS is the crawler process's high-water mark "
        "(VmHWM) for the embedded crawl, the fetch's Python heap peak (tracemalloc) at fetcher level.",
        "",
        *hostile_section(hostile),
        "",
    ]
    if soak:
        out += [
            "## Soak",
            "",
            "`crawlfleet bench soak`: fault trials back to back, every component struck in a seeded random order, "
            "judged as above (a repeat is excused only if the struck process itself made the request and its result "
            "never reached the journal). Commands and discussion: docs/bench/soak.md.",
            "",
            *soak_section(soak),
            "",
        ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "RELIABILITY.md")
    ap.add_argument("--soak", type=Path, nargs="*", default=[], help="bench soak records (JSON lines) to add")
    args = ap.parse_args(argv)
    text = render(args.results or results.results_path(), soak=args.soak)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
