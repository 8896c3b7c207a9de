"""``crawlfleet jobs run``: segments -> extract -> update crawl db -> pending set, on any runner.

Examples::

    crawlfleet jobs run --runner local --segment var/crawl/segments/segment-00000.jsonl \\
        --store sqlite:var/crawl/crawl.db --allowed-domain crawl.test --max-depth 5
    crawlfleet jobs run --runner spark --segments-dir var/crawl/segments --follow \\
        --store sqlite:var/crawl/crawl.db      # processes each segment once the writer closes it

One JSON summary line per segment goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from jobs.logic import open_store
from jobs.runner import JobArgs, LinkPipeline, RoundResult
from jobs.runnerconfig import RUNNERS, RunnerConfig
from jobs.watch import closed_segments, run_pipelined, watch_segments
from pipeline.observe.errors import existing_file, int_at_least
from pipeline.observe.progress import task_progress


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    jobs = subparsers.add_parser("jobs", help="MapReduce link processing (mrjob)")
    jsub = jobs.add_subparsers(dest="jobs_command", required=True)
    run = jsub.add_parser("run", help="run the link jobs over closed segments")
    run.add_argument(
        "--runner",
        choices=RUNNERS,
        default="inline",
        help="where mrjob runs the jobs (default inline: in this process)",
    )
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--segment", action="append", type=existing_file, help="a segment file (repeatable)")
    src.add_argument("--segments-dir", type=Path, help="process every closed segment of this directory")
    run.add_argument(
        "--follow",
        action="store_true",
        help="with --segments-dir: keep watching; stop once FILE named by --stop-file exists",
    )
    run.add_argument("--stop-file", type=Path, help="with --follow: its existence means the crawl ended")
    run.add_argument("--store", required=True, help="sqlite:PATH, hbase or hbase://HOST:PORT/PREFIX")
    run.add_argument("--allowed-domain", action="append", default=[], help="repeatable; none = any domain")
    run.add_argument(
        "--max-depth", type=int_at_least(0), default=10, help="links deeper than this are left out"
    )
    run.add_argument(
        "--max-links", type=int_at_least(0), default=10_000, help="links taken from one page at most"
    )
    run.add_argument("--batch-size", type=int_at_least(1), default=500, help="URLs per store round trip")
    run.add_argument("--lru-size", type=int_at_least(0), default=200_000, help="S5 local seen-cache entries")
    run.add_argument("--spark-master", default="local[2]", help="Spark master URL for --runner spark")
    run.add_argument("--conf-path", help="mrjob.conf (e.g. for EMR; see docs/mrjob.emr.conf.example)")
    run.add_argument("--work-dir", type=Path, default=Path("var/jobs"), help="scratch directory of the jobs")
    run.add_argument("--host-stats", action="store_true", help="also run mr_host_stats per segment")
    run.add_argument(
        "--reprocess",
        action="store_true",
        help="also run segments this store has already processed (their in-links count once)",
    )
    run.set_defaults(func=_run)


def _segments(args: argparse.Namespace) -> Iterable[Path]:
    if args.segment:
        return args.segment
    if not args.follow:
        return closed_segments(args.segments_dir, include_last=True)
    stop = args.stop_file
    return watch_segments(args.segments_dir, done=lambda: stop is not None and stop.exists())


def _run(args: argparse.Namespace) -> int:
    cfg = RunnerConfig(
        runner=args.runner,
        work_dir=args.work_dir.resolve(),
        spark_master=args.spark_master,
        conf_path=args.conf_path,
    )
    jargs = JobArgs(
        store=args.store,
        allowed_domains=tuple(args.allowed_domain),
        max_depth=args.max_depth,
        max_links=args.max_links,
        batch_size=args.batch_size,
        lru_size=args.lru_size,
    )
    pipeline = LinkPipeline(cfg, jargs, host_stats=args.host_stats)
    # The store remembers which segments went through the loop, so a restarted driver skips them.
    store = open_store(args.store)
    paths: dict[str, Path] = {}

    def todo() -> Iterator[Path]:
        for seg in _segments(args):
            key = _done_key(seg)
            if args.reprocess or store.get_meta(key) is None:
                paths[seg.name] = seg
                yield seg

    # mrjob's inline runner swaps the process-wide sys.stdout/sys.stderr while a job runs on the
    # pipeline's background thread; write our lines to streams on duplicated descriptors instead.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    err = os.fdopen(os.dup(2), "w", buffering=1)
    total = 0
    try:
        # A segment is its own round, with an id of its own: a driver killed inside a merge runs the segment
        # again under the same id, and the store counts no in-link twice.
        def process(seg: Path) -> RoundResult:
            return pipeline.process(seg, round_id=_done_key(seg))

        rounds = task_progress(run_pipelined(todo(), process), desc="jobs", unit="segment", stream=err)
        for result in rounds:
            total += len(result.new_pending)
            line = result.summary()
            store.put_meta(_done_key(paths[result.segment]), json.dumps(line, sort_keys=True))
            if result.host_stats is not None:
                line["host_stats"] = result.host_stats
            print(json.dumps(line, sort_keys=True), file=out, flush=True)
    finally:
        pipeline.close()
        store.close()
    print(json.dumps({"done": True, "new_pending_total": total}), file=err, flush=True)
    out.close()
    err.close()
    return 0


def _done_key(segment: Path) -> str:
    return f"jobs.done:{segment.resolve()}"
