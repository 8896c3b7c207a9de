"""Pure figures of ``crawlfleet bench peers``: one crawler's run judged from the testbed's access log, and
the repeats of a crawler summed up as medians and spreads. No I/O, no clock.

A run's lines are the access-log lines its crawl caused (the bench runs one crawler at a time and reads
the lines logged between its start and its end). From them:

- ``pages``: distinct pages of the ground truth answered 200 (over the run's scheme);
- ``coverage``: ``pages`` / pages in the truth;
- ``duplicates``: requests for a URL beyond its first (robots.txt left out);
- ``extra``: distinct URLs requested that the truth does not fetch (robots.txt and the trap left out);
- ``window_s``: first to last logged request; ``pages_per_s`` = ``pages`` / ``window_s`` (a process's
  start-up and shut-down are outside the window, for every crawler alike);
- ``cpu_s_per_1k_pages``: CPU seconds of the crawler's whole process tree per 1,000 ``pages``.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Key = tuple[str, str, str]  # (scheme, host, path)
FIGURES = ("pages_per_s", "cpu_s_per_1k_pages", "coverage", "duplicates", "requests", "pages", "window_s",
           "wall_s", "cpu_s")  # fmt: skip


def line_key(line: Mapping[str, Any]) -> Key:
    return (str(line.get("scheme", "http")), str(line["host"]), str(line["path"]))


def judge_run(lines: Iterable[Mapping[str, Any]], truth_pages: set[Key], *, truth_fetch: set[Key],
              cpu_s: float, wall_s: float, trap_prefix: str = "/calendar/") -> dict[str, Any]:  # fmt: skip
    """One run's figures (the module docstring says what each is)."""
    counts: Counter[Key] = Counter()
    ok: set[Key] = set()
    first = last = None
    for line in lines:
        key = line_key(line)
        counts[key] += 1
        t = float(line["t"])
        first = t if first is None or t < first else first
        last = t if last is None or t > last else last
        if int(line["status"]) == 200 and key in truth_pages:
            ok.add(key)
    window = (last - first) if first is not None and last is not None else 0.0
    pages = len(ok)
    not_robots = {k: n for k, n in counts.items() if k[2] != "/robots.txt"}
    extra = [k for k in not_robots if k not in truth_fetch and not k[2].startswith(trap_prefix)]
    return {
        "pages": pages,
        "coverage": round(pages / len(truth_pages), 4) if truth_pages else 0.0,
        "requests": sum(counts.values()),
        "robots_requests": sum(n for k, n in counts.items() if k[2] == "/robots.txt"),
        "duplicates": sum(n - 1 for n in not_robots.values()),
        "extra": len(extra),
        "window_s": round(window, 3),
        "pages_per_s": round(pages / window, 1) if window > 0 else 0.0,
        "cpu_s": round(cpu_s, 3),
        "cpu_s_per_1k_pages": round(1000 * cpu_s / pages, 3) if pages else 0.0,
        "wall_s": round(wall_s, 3),
    }


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Median, min, max and spread ((max - min) / median) of every figure over the repeats."""
    out: dict[str, Any] = {"repeats": len(runs)}
    for name in FIGURES:
        values = [float(r[name]) for r in runs if name in r]
        if not values:
            continue
        med = statistics.median(values)
        out[name] = {"median": round(med, 4), "min": min(values), "max": max(values),
                     "spread": round((max(values) - min(values)) / med, 3) if med else 0.0}  # fmt: skip
    return out


def fastest(summaries: Mapping[str, Mapping[str, Any]], prefix: str) -> str | None:
    """The name, among ``summaries`` starting with ``prefix``, with the highest median pages/s."""
    names = [n for n in summaries if n.startswith(prefix) and "pages_per_s" in summaries[n]]
    return max(names, key=lambda n: summaries[n]["pages_per_s"]["median"], default=None)


def ratios(summaries: Mapping[str, Mapping[str, Any]], ours: str, others: Mapping[str, str]) -> dict[str, float]:
    """``{label}_pages_per_s`` and ``{label}_cpu_per_page`` of ``ours`` against each of ``others``
    (label -> crawler name), from the medians."""
    out: dict[str, float] = {}
    mine = summaries.get(ours)
    for label, name in others.items():
        theirs = summaries.get(name)
        if not mine or not theirs or "pages_per_s" not in mine or "pages_per_s" not in theirs:
            continue
        if theirs["pages_per_s"]["median"]:
            out[f"{label}_pages_per_s"] = round(mine["pages_per_s"]["median"] / theirs["pages_per_s"]["median"], 3)
        if theirs["cpu_s_per_1k_pages"]["median"]:
            out[f"{label}_cpu_per_page"] = round(
                mine["cpu_s_per_1k_pages"]["median"] / theirs["cpu_s_per_1k_pages"]["median"], 3
            )
    return out


def interleaved(names: list[str], repeat: int) -> list[str]:
    """The crawlers' order in repeat ``repeat``: rotated by one each time, so none always runs first."""
    if not names:
        return []
    k = repeat % len(names)
    return names[k:] + names[:k]
