"""Link rounds on one long-lived Spark application: a round costs Spark's task scheduling, not a cold start.

mrjob's spark runner starts ``spark-submit`` for every job: a driver JVM, the upload of the job's files to
the cluster's storage, executors started for the application; tens of seconds a round on the dev stack, which
a deep or narrow crawl pays once per hop of its link graph. ``SparkRounds`` keeps one ``SparkContext`` for
the life of ``crawlfleet links`` and runs each round's ``MRLinkRound`` on it the way mrjob's own Spark
harness runs a streaming job: each partition builds the job from its arguments and feeds pairs through its
step with ``MRJob.map_pairs`` and ``reduce_pairs`` (the job's own mapper and reducer code, unchanged), and
a ``groupByKey`` is the shuffle. The executors import the installed crawlfleet (as mrjob's tasks do); the
plugins' code travels as the zip the job's ``--py-files`` names (``sc.addPyFile``).

A context that fails (the master restarted, the application was killed) is dropped and the next round
starts a new one; the round itself fails and is run again by the link service (its lease and merge id
make the second run count nothing twice).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from jobs.jobrun import JobOutput
from jobs.runnerconfig import RunnerConfig

log = logging.getLogger(__name__)


def _job(job_args: list[str]) -> Any:
    from jobs.mr_link_round import MRLinkRound

    return MRLinkRound(args=job_args)


def _map(job_args: list[str], step: int, pairs: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    yield from _job(job_args).map_pairs(pairs, step)


def _reduce(job_args: list[str], step: int, groups: Iterable[tuple[Any, Iterable[Any]]]) -> Iterator[tuple[Any, Any]]:
    pairs = ((key, value) for key, values in groups for value in values)
    yield from _job(job_args).reduce_pairs(pairs, step)


def _py_files(job_args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The job's arguments without ``--py-files PATH`` pairs, and those paths."""
    args: list[str] = []
    files: list[str] = []
    it = iter(job_args)
    for arg in it:
        if arg == "--py-files":
            files += next(it, "").split(",")
        else:
            args.append(arg)
    return args, [f for f in files if f]


class SparkRounds:
    """One Spark application for every round of a link service (not thread-safe: one round at a time)."""

    def __init__(self, cfg: RunnerConfig) -> None:
        self.cfg = cfg
        self._sc: Any = None
        self._shipped: set[str] = set()

    def context(self) -> Any:
        if self._sc is None:
            from pyspark import SparkConf, SparkContext

            from jobs.runnerconfig import spark_conf

            conf = SparkConf().setMaster(self.cfg.spark_master).setAppName("crawlfleet-links")
            for item in spark_conf(self.cfg):
                name, _, value = item.partition("=")
                conf.set(name, value)
            # Kept for the service's life, the application gives back executors it does not use (another
            # link service's rounds, another crawl's, need the cluster's cores between its rounds), one core
            # each. A round's shuffle files are never read after it ends, so an executor holding them is
            # released too (shuffle tracking would keep it for ever, and a second service's round would wait
            # for an executor that never comes); and executors are small enough for two per 1 GiB worker.
            for name, value in (("spark.dynamicAllocation.enabled", "true"),
                                ("spark.dynamicAllocation.shuffleTracking.enabled", "true"),
                                ("spark.dynamicAllocation.shuffleTracking.timeout", "20s"),
                                ("spark.dynamicAllocation.minExecutors", "0"),
                                ("spark.dynamicAllocation.executorIdleTimeout", "10s"),
                                ("spark.executor.cores", "1"), ("spark.executor.memory", "512m")):  # fmt: skip
                conf.setIfMissing(name, value)
            conf.set("spark.executorEnv.PYSPARK_PYTHON", self.cfg.python_bin)
            # The driver names the executors' Python with every task, from its own environment.
            os.environ["PYSPARK_PYTHON"] = self.cfg.python_bin
            # py4j logs each gateway connection's opening and closing at INFO, the last of them from a
            # finalizer at interpreter exit, after the log's stream is closed ("--- Logging error ---").
            logging.getLogger("py4j").setLevel(logging.WARNING)
            self._sc = SparkContext(conf=conf)
            self._sc.setLogLevel("WARN")
            self._shipped = set()
            log.info("links: a Spark application on %s for every round", self.cfg.spark_master)
        return self._sc

    def run(self, inputs: Sequence[str], job_args: Sequence[str]) -> JobOutput:
        """One round: ``inputs`` are manifest lines (one segment each); the URLs that became PENDING back."""
        args, files = _py_files(job_args)
        started = time.perf_counter()
        try:
            sc = self.context()
            for path in files:
                if path not in self._shipped:
                    sc.addPyFile(path)
                    self._shipped.add(path)
            n = max(1, min(len(inputs), self.cfg.map_tasks))
            rdd = sc.parallelize([(None, line) for line in inputs], n)
            rdd = rdd.mapPartitions(lambda it: _map(args, 0, it))
            rdd = rdd.groupByKey(numPartitions=n).mapPartitions(lambda it: _reduce(args, 0, it))
            records = [value for _, value in rdd.collect()]
        except Exception:
            self.close()  # a broken context: the next round starts a new application
            raise
        return JobOutput(records, {}, time.perf_counter() - started)

    def close(self) -> None:
        sc, self._sc = self._sc, None
        if sc is not None:
            try:
                sc.stop()
            except Exception:  # stopping a broken context: nothing more to do
                log.warning("links: stopping the Spark application failed", exc_info=True)
