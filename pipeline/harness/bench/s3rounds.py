"""bench s3's rounds from a fleet crawl's event journal, and which of them count (pure; no I/O).

Round r is the r-th completed batch of every node. Its spread is max/min of those batches' times: the
nodes' own fetch time (``elapsed_s`` in the ``done`` event) and, beside it, the dispatcher's wall time
from issue to report. The warm-up is the prefix of rounds before every node's batch size has settled
(``pipeline.dispatch.sizing.settled_round`` over the sizes as issued and as asked: a batch the frontier
cut short, or an n_i still moving, keeps the warm-up going); the same rule judges n_i and equal batches. Every round,
warm-up or not, is returned with its figures and, for a warm-up round, why it did not count.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.dispatch.sizing import settled_round


@dataclass(frozen=True, slots=True)
class Done:
    """One completed batch of a node: its size as issued, n_i as asked (``want``), its times."""

    serial: int
    n: int
    want: int
    elapsed_s: float
    wall_s: float | None


@dataclass(frozen=True, slots=True)
class WarmupRule:
    """A round counts from the first one at which every node has ``min_batches`` batches behind it and
    sizes within ``tolerance`` over its last ``span`` rounds; at most ``max_rounds`` of warm-up (then
    the rest counts, flagged not settled). ``fixed``: a fixed count instead (``--warmup-rounds``)."""

    min_batches: int = 3
    span: int = 3
    tolerance: float = 0.10
    max_rounds: int = 40
    fixed: int | None = None


@dataclass(frozen=True, slots=True)
class Round:
    index: int
    spread: float
    spread_wall: float | None
    counted: bool
    sizes: tuple[int, ...]
    wants: tuple[int, ...]
    elapsed_s: tuple[float, ...]
    why: str  # empty for a counted round

    def as_json(self) -> dict[str, Any]:
        return {
            "round": self.index, "spread": round(self.spread, 3),
            "spread_wall": None if self.spread_wall is None else round(self.spread_wall, 3),
            "counted": self.counted, "n": list(self.sizes), "want": list(self.wants),
            "elapsed_s": [round(e, 3) for e in self.elapsed_s], "why_not_counted": self.why,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Judged:
    rounds: list[Round]
    warmup: int
    settled: bool
    reason: str

    @property
    def counted(self) -> list[Round]:
        return [r for r in self.rounds if r.counted]

    def median(self, *, wall: bool = False) -> float | None:
        xs = [r.spread_wall if wall else r.spread for r in self.counted]
        vals = [x for x in xs if x is not None]
        return statistics.median(vals) if vals else None


def node_batches(events: Iterable[Mapping[str, Any]], nodes: Sequence[str]) -> dict[str, list[Done]]:
    """Each node's completed batches in completion order (batches with no page or no time left out)."""
    issued: dict[int, Mapping[str, Any]] = {}
    out: dict[str, list[Done]] = {n: [] for n in nodes}
    for ev in events:
        if ev.get("ev") == "issue":
            issued[int(ev["serial"])] = ev
        elif ev.get("ev") == "done" and ev.get("node") in out:
            pages, elapsed = int(ev.get("pages", 0)), float(ev.get("elapsed_s", 0.0))
            if pages <= 0 or elapsed <= 0:
                continue
            iss = issued.get(int(ev["serial"]))
            n = int(iss["n"]) if iss is not None else pages
            want = int(iss.get("want", n)) if iss is not None else n
            wall = float(ev["t"]) - float(iss["t"]) if iss is not None and "t" in ev else None
            out[str(ev["node"])].append(Done(int(ev["serial"]), n, want, elapsed, wall))
    return out


def _why(seq: Sequence[Done], r: int, rule: WarmupRule) -> str:
    """Why one node is not settled at round r ("" when it is)."""
    if r < rule.min_batches:
        return f"{r} batch(es) behind it (t_i needs {rule.min_batches})"
    tail = seq[max(0, r - rule.span + 1) : r + 1]
    cut = [d for d in tail if d.n * (1.0 + rule.tolerance) + 1e-12 < d.want]
    if cut:
        return "frontier cut " + ", ".join(f"{d.n} of {d.want}" for d in cut)
    sizes = [d.n for d in tail]
    if len(tail) < rule.span or max(sizes) / max(1, min(sizes)) - 1.0 > rule.tolerance + 1e-12:
        return "n moving " + "->".join(str(s) for s in sizes)
    return ""


def judge(batches: Mapping[str, Sequence[Done]], nodes: Sequence[str], rule: WarmupRule) -> Judged:
    """Every round every node reached, the warm-up (by ``rule``) and why it ended where it did."""
    seqs = [batches[n] for n in nodes]
    total = min((len(s) for s in seqs), default=0)
    if rule.fixed is not None:
        warmup, settled = rule.fixed, True
        reason = f"fixed: the first {rule.fixed} rounds (--warmup-rounds)"
    else:
        got = settled_round([[d.n for d in s] for s in seqs], min_batches=rule.min_batches, span=rule.span,
                            tolerance=rule.tolerance, wanted=[[d.want for d in s] for s in seqs])  # fmt: skip
        per = ", ".join(f"{n} at {r}" for n, r in zip(nodes, got.per_fetcher, strict=True))
        if got.round is not None and got.round <= rule.max_rounds:
            warmup, settled = got.round, True
            reason = (f"settled: from round {got.round} every node had >= {rule.min_batches} batches behind it "
                      f"and sizes within {rule.tolerance:.0%} over its last {rule.span} rounds (each node "
                      f"alone: {per})")  # fmt: skip
        else:
            warmup, settled = min(rule.max_rounds, total), False
            reason = (f"not settled within {rule.max_rounds} rounds (each node alone: {per}); the rounds "
                      f"after {rule.max_rounds} count anyway")  # fmt: skip
    rounds = []
    for r in range(total):
        batch = [s[r] for s in seqs]
        el = [d.elapsed_s for d in batch]
        walls = [d.wall_s for d in batch if d.wall_s is not None and d.wall_s > 0]
        wall = max(walls) / min(walls) if len(walls) == len(batch) else None
        counted = r >= warmup
        why = "" if counted else "; ".join(
            f"{n}: {w}" for n, w in ((n, _why(s, r, rule)) for n, s in zip(nodes, seqs, strict=True)) if w
        ) or "fixed warm-up"  # fmt: skip
        rounds.append(Round(r, max(el) / min(el), wall, counted, tuple(d.n for d in batch),
                            tuple(d.want for d in batch), tuple(el), why))  # fmt: skip
    return Judged(rounds, warmup, settled, reason)


def finished(j: Judged, *, rounds: int, rule: WarmupRule) -> bool:
    """Enough rounds: ``rounds`` counted after a settled warm-up, or the warm-up's cap reached and
    ``rounds`` more behind it."""
    return len(j.counted) >= rounds and (j.settled or len(j.rounds) >= rule.max_rounds + rounds)
