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


SIG = {"kill": "SIGKILL", "stop": "SIGSTOP"}


def _n(r: dict[str, Any], key: str) -> int:
    return int(r.get(key) or 0)


def headline(recs: list[dict[str, Any]]) -> str:
    """One line over the latest run of every trial: repeats first (every ask beyond a URL's first)."""
    groups = latest(recs, lambda r: (r["component"], r["action"], r["mode"]))
    trials = [r for rs in groups.values() for r in rs]
    repeats = sum(_n(r, "repeats") for r in trials)
    unexcused = sum(_n(r, "repeats_unexcused") for r in trials)
    failing = sum(1 for r in trials if not r.get("ok"))
    return (f"**{len(trials)} trials: {repeats} repeated requests, {unexcused} of them not in flight on (or in the "
            f"last second of) the struck process; {sum(_n(r, 'lost') for r in trials)} pages lost; "
            f"{sum(_n(r, 'robots_extra') for r in trials)} extra robots.txt requests; {failing} trials failing "
            f"the verdict.**")  # fmt: skip


def fault_section(recs: list[dict[str, Any]]) -> list[str]:
    groups = latest(recs, lambda r: (r["component"], r["action"], r["mode"]))
    keys = sorted(groups, key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 99, k[1], k[2]))
    lines = [
        "| struck process | signal | mode | seed | fault after requests, pause s | requests in flight on it (server) "
        "| repeats | of which in flight / last second / unexcused | woken repeats | lost (unanswered + unstored) "
        "| extra robots.txt | recovery s | verdict | run |",
        "|---|---|---|---:|---|---:|---:|---|---:|---|---:|---:|---|---|",
    ]
    for k in keys:
        for r in sorted(groups[k], key=lambda r: r["seed"]):
            where = r.get("fault_after_requests", r.get("fault_after_rounds"))
            lines.append(
                f"| {r.get('process') or k[0]} | {r.get('signal') or SIG.get(k[1], k[1])} | {k[2]} | {r['seed']} "
                f"| @{where}, {r['down_s']} | {_n(r, 'in_flight_at_fault')} | {_n(r, 'repeats')} "
                f"| {_n(r, 'in_flight_repeats')} / {_n(r, 'recent_repeats')} / {_n(r, 'repeats_unexcused')} "
                f"| {_n(r, 'woken_repeats')} | {_n(r, 'lost')} ({_n(r, 'lost_unanswered')} + {_n(r, 'lost_unstored')}) "
                f"| {_n(r, 'robots_extra')} | {r.get('recovery_s')} | {'ok' if r.get('ok') else '**fails**'} "
                f"| {r['run']} |"
            )
    samples = [f"- {k[0]} {SIG.get(k[1], k[1])} ({k[2]}) seed {r['seed']}: " + ", ".join(r["repeated_sample"])
               for k in keys for r in sorted(groups[k], key=lambda r: r["seed"]) if r.get("repeated_sample")]  # fmt: skip
    if samples:
        lines += ["", "Repeats no allowance covers, a sample of the URLs of each failing trial:", "", *samples]
    lines += ["", "Recovery time is measured from the fault to:", ""]
    lines += [f"- {c}: {RECOVERY[c]}" for c in ORDER if any(k[0] == c for k in keys)]
    return lines


def pin_state(where: str, test: str) -> str:
    """'open' while the test still carries an xfail marker (or calls an xfail), 'fixed' once it is a plain
    regression test, 'gone' when the test no longer exists."""
    path = ROOT / where
    if not path.exists():
        return "gone"
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"def {test}("):
            j = i - 1  # the decorators: every line up to the blank one before them
            while j >= 0 and lines[j].strip():
                if "xfail" in lines[j]:
                    return "open"
                j -= 1
            k = i + 1  # the body: an imperative xfail (e.g. tests/faults/verdict.py's) keeps the pin open
            while k < len(lines) and (not lines[k] or lines[k].startswith((" ", "\t"))):
                if "xfail" in lines[k]:
                    return "open"
                k += 1
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
    rows = ["| run | file | minutes | trials | components | repeats | of them unexcused | lost | harness errors |",
            "|---|---|---:|---:|---|---:|---:|---:|---:|"]  # fmt: skip
    for path in paths:
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        trials = [r for r in recs if r.get("type") == "fault" and "repeats" in r]  # judged from outside
        if not trials:
            continue
        first = min(r["t"] - r.get("wall_s", 0.0) for r in trials)
        minutes = (max(r["t"] for r in trials) - first) / 60
        comps = sorted({r["component"] for r in trials})
        errors = sum(1 for r in recs if r.get("type") == "harness_error" or r.get("error"))
        rows.append(f"| {trials[0].get('run', '?')} | `{path.name}` | {minutes:.0f} | {len(trials)} | {', '.join(comps)} "
                    f"| {sum(_n(r, 'repeats') for r in trials)} | {sum(_n(r, 'repeats_unexcused') for r in trials)} "
                    f"| {sum(_n(r, 'lost') for r in trials)} | {errors} |")  # fmt: skip
    return rows


def render(path: Path, soak: list[Path] | None = None) -> str:
    recs = list(results.read(path))
    faults = [r for r in recs if r.get("type") == "fault" and "repeats" in r]  # judged from outside
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
        headline(faults),
        "",
        "Each trial crawls the testbed (8 hosts x 25 pages, 212 pages of ground truth, about 250 requests), strikes "
        "one process once a seeded share of the expected requests has reached the testbed, brings it back after a "
        "seeded pause, and lets the crawl finish. Trials that strike a fetching process crawl at the product's "
        "default gap between requests to one host (0.25 s), so that a crawl lasts many seconds. Judged from "
        "outside the crawler (pipeline/harness/faults/accounting.py), never from its events, journal or logs: the "
        "testbed's access log (each request's start and end as the server saw them, and the pid its User-Agent "
        "names), the web's truth, the store read at the end, and the fault injector's own record of which "
        "processes its signal reached and when. **repeats** = every request for a URL beyond its first (beyond "
        "1 + fetch.retries for a URL that answers 500 every time; a request after a 5xx is a repeat like any "
        "other). A repeat is excused only if the struck process itself made the earlier request, in flight at the "
        "fault (started before it, not completed; a zero-length request holds its millisecond) or started less "
        "than a second before it (the node-side progress a fleet node is to report every second), and another "
        "process made the later one; a process that fetches nothing (dispatcher, broker, HBase, Thrift, link jobs, "
        "parse process, resolver) excuses nothing. **woken repeats** = repeats a stopped process made after its "
        "SIGCONT (never excused). **lost** = truth pages the server never answered plus pages it answered that the "
        "store does not hold. robots.txt is counted apart: once per host per crawl. For the job driver (it fetches "
        "nothing), lost = URLs missing from the crawl db against a run without a fault.",
        "",
        *fault_section(faults),
        "",
        "## Known bugs found by the suite",
        "",
        "Open: pinned by xfail tests (strict where the failure is deterministic); the trials they pin show in the "
        "table above with their repeats.",
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
            "judged as above. Commands and discussion: docs/bench/soak.md.",
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
