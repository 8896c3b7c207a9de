"""The fetch task: a thin shim from a Celery message to this process's ``FetchRuntime``.

Message: ``fetch_batch(batch_json, incarnation=..., scope=...)`` with ``batch_json`` the
``Batch.to_json()`` object. ``taskmsg.check_task_message`` validates the raw message before Celery decodes
it (the consumer rejects a bad one to the dead-letter queue); the task validates again, since Celery
can reach it by other paths. The task returns the small BatchReport JSON; the results themselves
have already been published to the service's results queue by the runtime's outbox.

The dispatcher's side, publishing a batch to its node's queue, is ``batchsend`` (the same Celery
message, built without Celery).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from celery import signals
from celery.exceptions import Reject

from pipeline.transport.node.celery_app import app, current_settings, reserved_count
from pipeline.transport.node.runtime import FetchRuntime
from pipeline.transport.wire import topology
from pipeline.transport.wire.messages import BadMessage
from pipeline.transport.wire.taskmsg import parse_task_args

log = logging.getLogger(__name__)

_runtime: FetchRuntime | None = None
_runtime_lock = threading.Lock()


# --- the runtime of this worker process ----------------------------------------------------------------
def start_runtime(*, slots: int | None = None) -> FetchRuntime:
    """Create and start this process's runtime (idempotent). The node comes from ``CRAWLFLEET_NODE``."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            from fetchers.choice import DEFAULT, worker_factory

            node = topology.check_name(os.environ.get("CRAWLFLEET_NODE", "default"), what="node")
            # The fetcher kind rides in the environment `crawlfleet worker --fetcher` set for Celery.
            factory = worker_factory(os.environ.get("CRAWLFLEET_NODE_FETCHER", DEFAULT))
            _runtime = FetchRuntime(current_settings(), node=node, slots=slots or 1, reserved=reserved_count,
                                    factory=factory)  # fmt: skip
            _runtime.start()
        return _runtime


def stop_runtime() -> None:
    global _runtime
    with _runtime_lock:
        if _runtime is not None:
            _runtime.close()
            _runtime = None


# Celery imports this module (the app's ``include``) before it sends ``worker_init``, so the runtime
# starts before the first task and stops with the worker.
@signals.worker_init.connect
def _start_runtime(sender: Any = None, **_: Any) -> None:
    start_runtime(slots=int(getattr(sender, "concurrency", 0) or 0) or None)


@signals.worker_shutdown.connect
def _stop_runtime(**_: Any) -> None:
    stop_runtime()


@app.task(name=topology.TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def fetch_batch(self: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        batch, incarnation, scope, sink = parse_task_args(list(args), kwargs)
    except BadMessage as exc:
        log.warning("dead-lettering task %s: %s", getattr(self.request, "id", "?"), exc)
        raise Reject(str(exc), requeue=False) from exc
    runtime = start_runtime()
    try:
        return runtime.run_batch(batch, incarnation=incarnation, scope=scope, sink=sink)
    except Exception as exc:
        # A fetcher bug must not lose the batch: report every URL unfinished so it is re-queued.
        log.exception("batch %d failed; reporting it unfinished", batch.serial)
        runtime.report_unfinished(batch).wait()
        return {"serial": batch.serial, "failed": repr(exc)}
