"""The testbed a fault trial crawls, and a reader of its access log that several trials can share.

Trials run one after another against one testbed (starting one per trial costs seconds on a loaded
machine); each trial reads only the access-log entries inside its own time window. The log is read
incrementally: only the bytes appended since the last read are parsed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.settings import PolitenessSettings

MAX_DEPTH = 12
FAST_S = 0.02  # the gap between requests to one host in most trials: the crawl takes a few seconds
# Trials that strike a fetching process crawl at the product's default gap instead, so that a crawl lasts
# many times the judge's RECENT_S (about 8 s for this bed) and what a kill costs beyond its last second shows.
PACE_S = PolitenessSettings().min_host_delay_s


@dataclass(frozen=True, slots=True)
class TrialPlan:
    """Where a seeded trial strikes: after ``at_fraction`` of the expected requests, for ``down_s``."""

    component: str
    action: str  # "kill" | "stop"
    seed: int
    at_fraction: float
    down_s: float

    @classmethod
    def seeded(cls, component: str, action: str, seed: int, *, lo: float = 0.15, hi: float = 0.75,
               down: tuple[float, float] = (0.3, 2.0)) -> TrialPlan:  # fmt: skip
        rng = random.Random(f"{component}/{action}/{seed}")
        return cls(component, action, seed, round(rng.uniform(lo, hi), 3), round(rng.uniform(*down), 2))


class Bed:
    """A running testbed plus its truth and an incremental access-log reader."""

    def __init__(self, tb: TestbedProcess, *, max_depth: int = MAX_DEPTH) -> None:
        self.tb = tb
        self.max_depth = max_depth
        self.truth: dict[str, Any] = tb.truth(max_depth=max_depth)
        self._offset = 0
        self._tail = b""
        self.entries: list[dict[str, Any]] = []

    @classmethod
    def start(cls, hosts: int, pages: int, *, seed: int, workdir: Path, hostile: bool = False) -> Bed:
        tb = TestbedProcess(hosts, pages, seed=seed, workdir=workdir, hostile=hostile).start()
        return cls(tb)

    def close(self) -> None:
        self.tb.close()

    @property
    def expected_requests(self) -> int:
        """Requests a clean crawl makes, about: every fetch URL plus one robots.txt per host."""
        return len(self.truth["fetch_urls"]) + self.tb.hosts

    def refresh(self) -> list[dict[str, Any]]:
        path = self.tb.access_log
        if not path.exists():
            return self.entries
        with open(path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        self._offset += len(data)
        data = self._tail + data
        lines = data.split(b"\n")
        self._tail = lines.pop()  # an incomplete last line waits for the next read
        for line in lines:
            if line.strip():
                self.entries.append(json.loads(line))
        return self.entries

    def window(self, start: float, end: float = float("inf")) -> list[dict[str, Any]]:
        return [e for e in self.refresh() if start <= e["t"] <= end]

    def count_since(self, start: float) -> int:
        return sum(1 for e in self.refresh() if e["t"] >= start)

    def settle(self) -> None:
        """Every request the testbed has completed is in ``entries`` when this returns (a flush request)."""
        self.tb.flush_log()
        self.refresh()
