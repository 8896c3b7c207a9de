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
from concurrent.futures import ProcessPoolExecutor


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
