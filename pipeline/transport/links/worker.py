"""The link service's extract worker: one process of its own that runs the extract jobs.

A process, not a thread: mrjob's inline runner (a one-task round runs inline there, ``jobs.runner.extract_links``)
changes the working directory and ``sys.stdout`` of the process it runs in, and a page that kills its
parser kills this worker, never the service (which replaces it and blames the page). Started by spawn:
the service's threads and connections stay out of it. It exits once the service that started it is gone:
a worker of a service killed with SIGKILL would otherwise wait on its task pipe for ever.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from jobs.jobrun import JobOutput
from jobs.runner import extract_links


class ExtractWorker:
    """The link service's extract jobs (``jobs.runner.extract_links``): each in the worker process, started
    at the first job and again after ``close`` (the service closes a worker that died); with ``extract``
    (tests), that function in this process instead."""

    def __init__(self, extract: Callable[..., JobOutput] | None = None) -> None:
        self._extract = extract
        self._pool: ProcessPoolExecutor | None = None

    def submit(self, *job: Any) -> Future[JobOutput]:
        if self._extract is not None:
            done: Future[JobOutput] = Future()
            done.set_result(self._extract(*job))
            return done
        if self._pool is None:
            self._pool = extract_pool()
        return self._pool.submit(extract_links, *job, in_worker=True)

    def run_here(self, *job: Any) -> JobOutput:
        """A job run in this process, waited for (a dead service's round taken over mid-merge)."""
        return (self._extract or extract_links)(*job)

    def close(self, *, wait: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=True)


def extract_pool() -> ProcessPoolExecutor:
    """A pool of one spawned worker that exits with this process."""
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=exit_with_parent, initargs=(os.getpid(),))  # fmt: skip


def exit_with_parent(parent: int, *, every_s: float = 1.0) -> None:
    """In the worker: exit once ``parent`` is no longer its parent (it died; the worker was re-parented)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
