"""Run the link jobs on any mrjob runner.

S3's loop: fetchers write results into segments; closed segments go through ``mr_extract_links`` ->
``mr_update_crawldb`` (or, on a cluster runner, ``mr_link_round``, both chained in one job); the URLs that
became PENDING are in the store, where the frontier picks them up. ``LinkPipeline`` runs a round over
segments; ``crawlfleet links`` (pipeline/transport/links/service.py) and ``crawlfleet jobs run`` (jobs/watch.py)
drive it.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jobs import logic, snapshot
from jobs.itemargs import ItemArgs
from jobs.jobrun import JobOutput, merge_counters, process_cpu, run_job
from jobs.mr_extract_links import MRExtractLinks
from jobs.mr_host_stats import MRHostStats
from jobs.mr_link_round import MRLinkRound
from jobs.mr_update_crawldb import MRUpdateCrawlDb
from jobs.runnerconfig import RunnerConfig
from pipeline.frontier.schedule import RECRAWL_META
from pipeline.storage import uris
from pipeline.urls import fingerprint


def manifests(segments: Sequence[Path | str], directory: Path, *, tasks: int) -> list[Path]:
    """Write the segments' manifest lines (``logic.segment_manifest_line``) into at most ``tasks`` files of
    ``directory``, largest segments first onto the lightest file, so map tasks get about equal bytes.
    Segments are local paths or storage URIs (``pipeline.storage.uris``); a task opens each where it runs."""
    directory.mkdir(parents=True, exist_ok=True)
    sized = sorted(((_size(str(s)), _ref(str(s))) for s in segments), reverse=True)
    n = max(1, min(tasks, len(sized)))
    loads = [0] * n
    parts: list[list[str]] = [[] for _ in range(n)]
    for size, ref in sized:
        i = loads.index(min(loads))
        loads[i] += size
        parts[i].append(ref)
    out = []
    for i, refs in enumerate(parts):
        target = directory / f"manifest-{i:03d}.txt"
        target.write_text("".join(logic.segment_manifest_line(r) + "\n" for r in refs), encoding="utf-8")
        out.append(target)
    return out


def _ref(segment: str) -> str:
    """A local segment's absolute path; a URI as it is."""
    return str(Path(segment.removeprefix("file://")).resolve()) if uris.is_local(segment) else segment


def _size(segment: str) -> int:
    if uris.is_local(segment):
        return Path(segment.removeprefix("file://")).stat().st_size
    loc = uris.locate(segment)
    return int(loc.fs.size(loc.path) or 0)


def tasks_for(cfg: RunnerConfig, segments: Sequence[Path | str]) -> RunnerConfig:
    """``cfg`` with the map tasks a round over ``segments`` gets: one on the inline runner; on the local
    runner and on Hadoop one per ``split_bytes`` of segments, ``map_tasks`` at most (a task's start costs
    more than a small round's work; on YARN a small job's tasks run one after another in its uber
    ApplicationMaster); on Spark and EMR ``map_tasks``."""
    if cfg.runner == "inline":
        return replace(cfg, map_tasks=1)
    if cfg.runner not in ("local", "hadoop"):
        return cfg
    total = sum(_size(str(s)) for s in segments)
    return replace(cfg, map_tasks=max(1, min(cfg.map_tasks, 1 + total // max(1, cfg.split_bytes))))


def merge_config(cfg: RunnerConfig) -> RunnerConfig:
    """The runner of a round's merge (``mr_update_crawldb``): on the local runner a one-task merge runs
    inline, in this process, whose imports are loaded: its work is store round trips over the extracted
    links, for which a task process's start and imports (numpy, the HBase client, the re-crawl planner:
    0.3 CPU-s) cost more than the work of a small round. No HTML is parsed there (a re-crawl's sitemaps
    are read with the bounded parser the embedded crawl runs in its own process). A larger round keeps
    its parallel task processes; the extract step runs inline only in a worker process of its own
    (``extract_links(in_worker=True)``: a page that kills its parser kills a task or that worker, never
    the link service)."""
    return replace(cfg, runner="inline") if cfg.runner == "local" and cfg.map_tasks == 1 else cfg


def extract_config(cfg: RunnerConfig, segments: Sequence[Path | str], *, in_worker: bool) -> RunnerConfig:
    """The runner of a round's extract job (``extract_links``): ``tasks_for``'s, run inline when it is one
    task on the local runner and the caller is a worker process of its own."""
    cfg = tasks_for(cfg, segments)
    return replace(cfg, runner="inline") if in_worker and cfg.runner == "local" and cfg.map_tasks == 1 else cfg


def extract_links(
    segments: Sequence[Path | str], job_args: Sequence[str], cfg: RunnerConfig, *, in_worker: bool = False
) -> JobOutput:
    """``mr_extract_links`` over whole segments: the job reads manifests naming them (one mapper call per
    segment, see the job's docstring), as many manifests as the round's map tasks (``tasks_for``). A
    segment is a local path or a storage URI that every task can open (``hdfs://``, ``s3://``).

    ``in_worker``: the caller is a process of its own that runs only these jobs (the link service's
    extract worker). On the local runner a one-task round then runs inline in it, as Hadoop's uber mode
    runs a small job inside its application master: a task's fork, its runner's files and the sort cost
    more than a small round's parse (a 1-segment round at the end of a deep crawl spent 0.35 s of a hop's
    0.45 s there; bench fleet on the 12.9k web, 2026-11-28, 2b1e2c6). A page that kills its parser then kills that worker, which the service replaces and
    blames the page for, as it does a task (pipeline/transport/links/quarantine.py)."""
    cfg = extract_config(cfg, segments, in_worker=in_worker)
    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="manifest-", dir=cfg.work_dir))
    if cfg.runner in ("inline", "local") and cfg.map_tasks == 1:  # one task: its records need no reduce step
        job_args = [*job_args, "--one-task"]
    try:
        return run_job(MRExtractLinks, manifests(segments, work, tasks=cfg.map_tasks), job_args, cfg, raw=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class JobArgs:
    """Arguments of the link jobs (scope, depth, store)."""

    store: str
    allowed_domains: tuple[str, ...] = ()
    max_depth: int = 10
    max_links: int = 10_000
    batch_size: int = 500
    lru_size: int = 200_000
    allow_regex: tuple[str, ...] = ()
    deny_regex: tuple[str, ...] = ()
    traps: str = ""  # logic.traps_arg(...); "" = the defaults
    count_inlinks: bool = True  # False: known URLs keep their in-link counts (dispatch.priority = "depth")
    # The parse guard of the extract job (pipeline/links/guard.py; the link service's pipeline/transport/links/quarantine.py):
    # where its tasks keep their markers, the pages it must not parse, and the CPU limit per page.
    guard_dir: str = ""
    quarantine: str = ""
    parse_cpu_limit_s: float = 3.0
    items: ItemArgs = ItemArgs()  # the crawl's plugins (jobs/plugged.py)

    def extract(self) -> list[str]:
        out = ["--max-depth", str(self.max_depth), "--max-links", str(self.max_links)]
        for d in self.allowed_domains:
            out += ["--allowed-domain", d]
        for flag, patterns in (("--allow-regex", self.allow_regex), ("--deny-regex", self.deny_regex)):
            for pattern in patterns:
                out += [flag, pattern]
        if self.traps:
            out += ["--traps", self.traps]
        if self.guard_dir:
            out += ["--guard-dir", self.guard_dir, "--parse-cpu-limit", str(self.parse_cpu_limit_s)]
        if self.quarantine:
            out += ["--quarantine", self.quarantine]
        return out + self.items.args(store=self.store, work_dir=Path(tempfile.gettempdir()) / "crawlfleet-plugins")

    def update(self) -> list[str]:
        out = ["--store", self.store, "--batch-size", str(self.batch_size), "--lru-size", str(self.lru_size)]
        if self.quarantine:  # the re-crawl's text simhash skips them, as the extract job's parse does
            out += ["--quarantine", self.quarantine]
        return out if self.count_inlinks else [*out, "--no-inlinks"]


@dataclass(slots=True)
class RoundResult:
    """One segment through the loop."""

    segment: str
    candidates: int
    new_pending: list[dict[str, Any]]
    extract_s: float
    update_s: float
    counters: dict[str, dict[str, int]]
    host_stats: list[dict[str, Any]] | None = None
    # CPU seconds of the two jobs, each counted where it ran: the process that ran it and its task
    # processes; the merge's includes writing its inputs. A cluster round (``run_round``) leaves both 0:
    # its work is in the cluster's containers, which ``bench fleet`` counts apart.
    extract_cpu_s: float = 0.0
    update_cpu_s: float = 0.0

    @property
    def pages(self) -> int:
        """The fetch results the extract job read (pages and failed fetches alike)."""
        return self.counters.get("extract", {}).get("results", 0)

    def summary(self) -> dict[str, Any]:
        return {
            "segment": self.segment, "candidates": self.candidates, "new_pending": len(self.new_pending),
            "extract_s": round(self.extract_s, 3), "update_s": round(self.update_s, 3),
            "extract_cpu_s": round(self.extract_cpu_s, 3), "update_cpu_s": round(self.update_cpu_s, 3),
            "counters": self.counters,
        }  # fmt: skip


class LinkPipeline:
    """segment -> extract -> update crawl db -> (new PENDING URLs are in the store).

    With ``carry_cache`` (the default) the S5 seen-cache survives from round to round: in memory, lent
    to merges that run in this process, and written as a fingerprint snapshot (jobs/snapshot.py) in
    ``cfg.work_dir`` for merges in task processes and on ``close()``.
    """

    def __init__(
        self, cfg: RunnerConfig, args: JobArgs, *, host_stats: bool = False, carry_cache: bool = True
    ) -> None:
        self.cfg = cfg
        self.args = args
        self.host_stats = host_stats
        digest = hashlib.sha1(args.store.encode()).hexdigest()[:12]
        self.snapshot_path = (
            cfg.work_dir / f"seen-{digest}.txt" if carry_cache and args.lru_size > 0 else None
        )
        self._carried: snapshot.Carried | None = None  # loaded at the first merge

    def process(self, segment: Path, *, round_id: str | None = None) -> RoundResult:
        return self.process_many([segment], name=segment.name, round_id=round_id)

    def process_many(
        self, segments: Sequence[Path | str], *, name: str, round_id: str | None = None
    ) -> RoundResult:
        """One round over several closed segments at once (a micro-batch: one job start-up for all).

        ``round_id`` tags the round's in-link counts in the store: a round killed mid-merge and run again
        with the same id and segments counts each URL's in-links once. None: a fresh id (a new round)."""
        extracted = self.extract(segments)
        return self.update(segments, extracted, name=name, round_id=round_id or uuid.uuid4().hex)

    def extract(self, segments: Sequence[Path | str]) -> JobOutput:
        """The round's first half, ``mr_extract_links``: reads segments, writes nothing to the store."""
        return extract_links(segments, self.args.extract(), self.cfg)

    def update(
        self, segments: Sequence[Path | str], extracted: JobOutput, *, name: str, round_id: str
    ) -> RoundResult:
        """The round's second half, ``mr_update_crawldb`` over ``extract``'s records, tagged ``round_id``.
        Merges must not overlap on one store (the HBase store's in-link counts are read-then-put)."""
        cpu = process_cpu()
        cfg = merge_config(tasks_for(self.cfg, segments))
        carried = self._carry()
        work = Path(tempfile.mkdtemp(prefix="round-", dir=self.cfg.work_dir))
        try:
            merged = _write_parts(work, extracted.json_lines(), parts=1 if cfg.runner == "inline" else cfg.map_tasks)
            update_args = [*self.args.update(), "--round-id", round_id]
            if carried is not None and cfg.runner == "inline":  # the merge runs here: it borrows the cache
                update_args.append("--seen-in-process")
                snapshot.lend(carried)
            elif carried is not None and self._save_snapshot():
                update_args += ["--seen-snapshot", str(self.snapshot_path)]
            # Re-crawling on: the update job also schedules the round's fetched URLs (jobs/recrawl.py),
            # reading the segments a manifest names where its tasks run.
            inputs = [*merged, *manifests(segments, work / "segments", tasks=1)] if self._recrawl_on() else merged
            updated = run_job(MRUpdateCrawlDb, inputs, update_args, cfg)
        finally:
            if carried is not None:
                snapshot.take_back(carried)
            shutil.rmtree(work, ignore_errors=True)
        if carried is not None:  # a merge here updated the cache in place; one in tasks did not
            carried.saved = False
            if cfg.runner != "inline":
                carried.add(fingerprint(url) for url in extracted.urls())
        stats = run_job(MRHostStats, list(segments), [], self.cfg).records if self.host_stats else None
        counters = merge_counters([extracted.counters, updated.counters])
        return RoundResult(name, len(extracted), updated.records, extracted.seconds, updated.seconds, counters,
                           stats, extract_cpu_s=extracted.cpu_s, update_cpu_s=process_cpu() - cpu)  # fmt: skip

    def run_round(
        self, segments: Sequence[Path | str], *, name: str, round_id: str,
        execute: Callable[[list[str], list[str]], JobOutput] | None = None,
    ) -> RoundResult:  # fmt: skip
        """A whole round as one job (``mr_link_round``): extract and merge chained on the runner, for the
        cluster runners. Only the URLs that became PENDING come back here. ``execute(manifest lines, job
        arguments)`` runs it elsewhere than on a new mrjob runner (``jobs.sparkapp.SparkRounds.run``)."""
        args = [*self.args.extract(), *self.args.update(), "--round-id", round_id]
        if self._recrawl_on():
            args.append("--recrawl")
        if execute is not None:
            out = execute([logic.segment_manifest_line(_ref(str(s))) for s in segments], args)
        else:
            self.cfg.work_dir.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix="round-", dir=self.cfg.work_dir))
            try:
                cfg = tasks_for(self.cfg, segments)
                out = run_job(MRLinkRound, manifests(segments, work, tasks=cfg.map_tasks), args, cfg)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        candidates = sum(out.counters.get("dedup", {}).get(k, 0) for k in ("local_hits", "remote_lookups"))
        return RoundResult(name, candidates, out.records, out.seconds, 0.0, out.counters)

    def _recrawl_on(self) -> bool:
        """The store's meta holds recrawl settings (the dispatcher writes them when re-crawling is on)."""
        store = logic.open_store(self.args.store)
        try:
            return bool(store.get_meta(RECRAWL_META))
        finally:
            store.close()

    def _carry(self) -> snapshot.Carried | None:
        """The seen-cache carried from round to round (None when not carrying): loaded once from the
        snapshot file when that was made for this store, then kept in memory."""
        if self.snapshot_path is None:
            return None
        if self._carried is None:
            store = logic.open_store(self.args.store)
            try:
                token = snapshot.store_token(store, create=True) or ""
            finally:
                store.close()
            file_token, ids = snapshot.read(self.snapshot_path)
            same = bool(file_token) and file_token == token
            self._carried = snapshot.Carried(token, self.args.lru_size, OrderedDict.fromkeys(ids if same else ()),
                                             saved=same)  # fmt: skip
            self._carried.trim()
        return self._carried

    def _save_snapshot(self) -> bool:
        """Write the carried cache to the snapshot file unless it holds it already; False: nothing to write."""
        carried = self._carried
        if carried is None or self.snapshot_path is None:
            return False
        if not carried.saved:
            self.cfg.work_dir.mkdir(parents=True, exist_ok=True)
            snapshot.write(self.snapshot_path, carried.token, carried.ids)
            carried.saved = True
        return True

    def close(self) -> None:
        """Write the carried cache for the next driver of this store (a restarted service starts warm)."""
        self._save_snapshot()


def _write_parts(directory: Path, lines: Sequence[bytes], *, parts: int) -> list[Path]:
    """JSON ``lines`` in ``parts`` files of about equal length, in order (one map task each)."""
    n = max(1, min(parts, len(lines)))
    size = -(-len(lines) // n)
    out = [directory / f"candidates-{i:03d}.jsonl" for i in range(n)]
    for i, path in enumerate(out):
        with open(path, "wb") as fh:
            fh.writelines(line + b"\n" for line in lines[i * size : (i + 1) * size])
    return out
