"""Run one mrjob job to completion on a configured runner (``jobs.runnerconfig``) and collect its output.

The local and inline runners are mrjob's with one map task per input file (``jobs.localrunner``); the
Hadoop runner talks to HDFS over WebHDFS (``jobs.hdfsfs``); any other runner is the job's own.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mrjob.job import MRJob
from mrjob.util import to_lines

from jobs import hdfsfs, logic, taskfork
from jobs.localrunner import InlineRunner, LocalRunner
from jobs.runnerconfig import RunnerConfig


class JobOutput:
    """A job's output records (JSON values), counters and wall time.

    ``lines``: the records as the job wrote them, one JSON value a line, kept undecoded for a job that
    reads them next (the extract job's output is the merge job's input: decoding, pickling the dicts
    across the extract worker's pipe and encoding them again cost the link path a few % of its CPU);
    ``records`` decodes them on first use."""

    __slots__ = ("_records", "counters", "cpu_s", "lines", "seconds")

    def __init__(
        self, records: list[Any] | None, counters: dict[str, dict[str, int]], seconds: float,
        *, lines: list[bytes] | None = None,
    ) -> None:  # fmt: skip
        self._records = records
        self.counters = counters
        self.seconds = seconds
        self.lines = lines
        self.cpu_s = 0.0  # CPU of the process that ran the job and its task processes (``run_job``)

    @property
    def records(self) -> list[Any]:
        if self._records is None:
            self._records = [json.loads(line) for line in self.lines or ()]
        return self._records

    def __len__(self) -> int:
        return len(self.lines) if self.lines is not None else len(self.records)

    def json_lines(self) -> list[bytes]:
        """The records as JSON lines (without their newlines), as written or encoded now."""
        if self.lines is not None:
            return self.lines
        return [json.dumps(r, separators=(",", ":")).encode() for r in self.records]

    def urls(self) -> Iterator[str]:
        """Each record's ``url`` (link records, ``logic.merge_link_values``), read without decoding a
        whole line when it was kept as written."""
        if self._records is not None or self.lines is None:
            return (r["url"] for r in self.records)
        return (logic.url_of_line(line) for line in self.lines)


def run_job(
    job_cls: type[MRJob], inputs: Sequence[Path | str], job_args: Sequence[str], cfg: RunnerConfig,
    *, raw: bool = False,
) -> JobOutput:  # fmt: skip
    """Run one job to completion and return its output records and counters; ``raw``: the records kept
    as the job wrote them (``JobOutput.lines``)."""
    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    argv = [*cfg.args(), *job_args, *[str(p) for p in inputs]]
    job = job_cls(args=argv)
    started, cpu = time.perf_counter(), process_cpu()
    # The local and inline runners: mrjob's, with one map task per input file (jobs/localrunner.py).
    with (LocalRunner(mrjob_cls=job_cls, **job._runner_kwargs()) if cfg.runner == "local"
          else InlineRunner(**job._runner_kwargs()) if cfg.runner == "inline"
          else job.make_runner()) as runner:  # fmt: skip
        if cfg.runner == "hadoop" and str(runner._opts.get("hadoop_tmp_dir") or "").startswith("hdfs://"):
            hdfsfs.use_webhdfs(runner)  # its HDFS calls over HTTP, not a `hadoop fs` JVM each
        runner.run()
        if raw:
            lines = [line.rstrip(b"\r\n") for line in to_lines(runner.cat_output()) if line.strip()]
            out = JobOutput(None, {}, 0.0, lines=lines)
        else:
            out = JobOutput([value for _, value in job.parse_output(runner.cat_output())], {}, 0.0)
        out.counters = merge_counters(runner.counters())
    out.seconds = time.perf_counter() - started
    out.cpu_s = process_cpu() - cpu
    return out


def process_cpu() -> float:
    """CPU seconds of this process, its reaped children and the local runner's forked tasks
    (``taskfork.forked_cpu_s``); a cluster's containers are not counted."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + taskfork.forked_cpu_s()


def merge_counters(per_step: list[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for step in per_step or []:
        for group, names in step.items():
            for name, n in names.items():
                out.setdefault(group, {})[name] = out.setdefault(group, {}).get(name, 0) + n
    return out
