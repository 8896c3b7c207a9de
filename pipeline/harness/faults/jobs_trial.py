"""Fault trial of the MapReduce job driver: ``crawlfleet jobs run`` SIGKILLed mid-way, then run again.

The input is real: the journal of a clean embedded crawl of the bed, split into ``pieces`` segments so
that the driver works through several rounds. A reference run without a fault fills one crawl db;
the trial run, killed at a seeded point (a seeded share into a round, so the kill can land inside a
merge) and started again with the same command, fills another. They must end equal:

- lost: URLs the reference crawl db holds and the trial's does not;
- inlinks_doubled: URLs whose in-link count is above the reference (a segment's links merged twice);
- the driver fetches nothing: no request, so no repeat;
- recovery_s: from the kill to the first round the restarted driver finishes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.embedded import crawler
from pipeline.harness.faults.procs import HarnessError, Managed, wait_until

# The trial drives the real multi-process ``local`` runner: the ``inline`` runner aborts now and then
# when the pipelined driver prints a round while the next one runs (tests/faults/test_faults_known_bugs.py).
RUNNER = "local"


def make_segments(bed: Bed, workdir: Path, *, pieces: int = 8) -> Path:
    """Crawl the bed once (no fault) and split its journal into ``pieces`` segment files."""
    crawl_dir = workdir / "crawl"
    proc = crawler(bed, crawl_dir).start()
    if proc.wait(240) != 0:
        raise HarnessError(f"reference crawl failed:\n{proc.log_tail()}")
    lines: list[bytes] = []
    for seg in sorted((crawl_dir / "out" / "segments").glob("segment-*.jsonl")):
        lines += [ln for ln in seg.read_bytes().splitlines(keepends=True) if ln.endswith(b"\n")]
    out = workdir / "segments"
    out.mkdir(parents=True, exist_ok=True)
    per = max(1, -(-len(lines) // pieces))
    for i in range(0, len(lines), per):
        (out / f"segment-{i // per:05d}.jsonl").write_bytes(b"".join(lines[i : i + per]))
    return out


def jobs_cmd(segments: Path, db: Path, work: Path, bed: Bed, *, runner: str = RUNNER, one: bool = False) -> list[str]:
    source = ["--segment", str(segments)] if one else ["--segments-dir", str(segments)]
    return [
        sys.executable, "-m", "pipeline.cli", "jobs", "run", "--runner", runner, *source,
        "--store", f"sqlite:{db}", "--allowed-domain", "crawl.test", "--max-depth", str(bed.max_depth),
        "--work-dir", str(work),
    ]  # fmt: skip


def seed_db(db: Path, bed: Bed) -> None:
    """A crawl db holding the seeds, as a crawl starts."""
    from pipeline.storage.base import UrlRecord
    from pipeline.storage.sqlite import SqliteStore
    from pipeline.urls import fingerprint, host_of, normalize

    st = SqliteStore(db)
    try:
        urls = [u for u in (normalize(s) for s in bed.tb.seeds) if u]
        st.add_urls([UrlRecord(u, fingerprint(u), host_of(u), 0) for u in urls])
        st.flush()
    finally:
        st.close()


def crawl_db(db: Path) -> dict[str, int]:
    """URL -> in-link count of every PENDING URL (the jobs only ever add PENDING URLs)."""
    from pipeline.storage.sqlite import SqliteStore

    st = SqliteStore(db)
    try:
        out: dict[str, int] = {}
        for host, _ in st.pending_hosts():
            for rec in st.pending(host, 1_000_000):
                out[rec.url] = rec.inlinks
        return out
    finally:
        st.close()


def reference(bed: Bed, segments: Path, workdir: Path) -> dict[str, int]:
    """The crawl db after every segment, one ``--segment`` run each (inline: one job at a time, no race)."""
    db = workdir / "ref.db"
    seed_db(db, bed)
    for seg in sorted(segments.glob("segment-*.jsonl")):
        cmd = jobs_cmd(seg, db, workdir / "ref-work", bed, runner="inline", one=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise HarnessError(f"reference jobs run failed: {proc.stderr[-2000:]}")
    return crawl_db(db)


def _rounds(path: Path) -> int:
    try:
        return sum(1 for ln in path.read_text().splitlines() if ln.startswith('{"candidates"'))
    except OSError:
        return 0


def jobs_trial(bed: Bed, segments: Path, ref: dict[str, int], workdir: Path, plan: TrialPlan) -> dict[str, Any]:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    db = workdir / "trial.db"
    seed_db(db, bed)
    pieces = len(list(segments.glob("segment-*.jsonl")))
    exact = min(pieces - 1.0, max(1.0, pieces * plan.at_fraction))
    at = int(exact)  # kill this far into round at+1: (exact - at) of a round's time after round ``at``
    proc = Managed("jobs", jobs_cmd(segments, db, workdir / "work", bed), dict(os.environ), workdir / "jobs.log",
                   stdout_path=workdir / "jobs.out")  # fmt: skip
    start = time.time()
    proc.start()
    try:
        def reached() -> bool:
            if not proc.running:
                raise HarnessError(f"jobs driver exited before round {at}:\n{proc.log_tail()}")
            return _rounds(workdir / "jobs.out") >= at

        wait_until(reached, timeout_s=240, every_s=0.01, what=f"{at} job rounds")
        per_round = (time.time() - start) / at
        time.sleep((exact - at) * per_round)  # mid-round: during a merge, or between a merge and its marker
        fault_t = proc.kill()
        before = _rounds(workdir / "jobs.out")
        time.sleep(plan.down_s)
        proc.start()
        wait_until(lambda: _rounds(workdir / "jobs.out") > before or not proc.running, timeout_s=240,
                   what="a round of the restarted driver")  # fmt: skip
        back_t = time.time()
        if proc.wait(300) != 0:
            raise HarnessError(f"restarted jobs driver failed:\n{proc.log_tail()}")
        end_t = time.time()
    finally:
        proc.terminate()
    got = crawl_db(db)
    lost = sorted(set(ref) - set(got))
    extra = sorted(set(got) - set(ref))
    doubled = sorted(u for u, n in got.items() if u in ref and n > ref[u])
    return {
        "type": "fault", "mode": "jobs", "component": "jobs", "action": plan.action, "seed": plan.seed,
        "at_fraction": plan.at_fraction, "fault_after_rounds": before, "rounds": pieces, "down_s": plan.down_s,
        "wall_s": round(end_t - start, 3), "truth_pages": len(ref), "stored_pages": len(set(ref) & set(got)),
        "process": "jobs", "signal": "SIGKILL", "fault_t": fault_t,
        "lost": len(lost), "lost_unanswered": 0, "lost_unstored": len(lost), "inlinks_doubled": len(doubled),
        "requests": 0, "repeats": 0, "repeats_unexcused": 0, "in_flight_at_fault": 0, "recent_at_fault": 0,
        "in_flight_repeats": 0, "recent_repeats": 0, "woken_repeats": 0, "robots_requests": 0, "robots_extra": 0,
        "extra_urls": len(extra), "inlinks_ref": sum(ref.values()), "inlinks_trial": sum(got.values()),
        "recovery_s": round(back_t - fault_t, 3), "lost_sample": lost[:10], "doubled_sample": doubled[:10],
        "repeated_sample": [], "ok": not lost and not doubled and not extra, "summary": {"runner": RUNNER},
    }  # fmt: skip


def describe(rec: dict[str, Any]) -> str:
    return json.dumps({k: rec[k] for k in ("lost", "inlinks_doubled", "extra_urls", "inlinks_ref", "inlinks_trial")})
