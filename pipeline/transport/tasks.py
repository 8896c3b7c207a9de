"""The fetch task: a thin shim from a Celery message to this process's ``FetchRuntime``.

Message: ``fetch_batch(batch_json, incarnation=..., scope=...)`` with ``batch_json`` the
``Batch.to_json()`` object. ``check_task_message`` validates the raw message before Celery decodes
it (the consumer rejects a bad one to the dead-letter queue); the task validates again, since Celery
can reach it by other paths. The task returns the small BatchReport JSON; the results themselves
have already been published to the service's results queue by the runtime's outbox.

``send_batch`` is the dispatcher's side: it publishes one batch to the chosen node's queue.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, Protocol

from celery import Celery
from celery.exceptions import Reject
from kombu import Producer

from fetchers.records import Batch, SchemaError
from fetchers.report import BatchReport
from pipeline.transport import topology
from pipeline.transport.celery_app import app, current_settings, reserved_count
from pipeline.transport.messages import CONTENT_TYPE, BadMessage
from pipeline.transport.runtime import FetchRuntime, scope_from_json
from pipeline.urls import Scope

log = logging.getLogger(__name__)

_runtime: FetchRuntime | None = None
_runtime_lock = threading.Lock()
_scopes: dict[str, Scope | None] = {}


def parse_task_args(args: Any, kwargs: Any) -> tuple[Batch, str | None, Scope | None]:
    """``(batch, incarnation, scope)`` from the task's arguments, or BadMessage saying what is wrong."""
    if not isinstance(args, list | tuple) or len(args) != 1 or not isinstance(kwargs, dict):
        raise BadMessage("wrong schema: fetch_batch takes exactly one positional argument (the batch)")
    unknown = set(kwargs) - {"incarnation", "scope"}
    if unknown:
        raise BadMessage(f"wrong schema: unknown arguments {sorted(unknown)}")
    try:
        batch = Batch.from_json(args[0])
    except (SchemaError, TypeError, ValueError) as exc:
        raise BadMessage(f"wrong schema: batch: {exc}") from exc
    if not _name_ok(batch.service):
        raise BadMessage(f"wrong schema: bad service name {batch.service[:80]!r}")
    incarnation = kwargs.get("incarnation")
    if incarnation is not None and not isinstance(incarnation, str):
        raise BadMessage("wrong schema: incarnation must be a string")
    raw_scope = kwargs.get("scope")
    key = json.dumps(raw_scope, sort_keys=True)
    if key not in _scopes:
        try:
            scope = scope_from_json(raw_scope)
        except ValueError as exc:
            raise BadMessage(f"wrong schema: scope: {exc}") from exc
        if len(_scopes) > 64:
            _scopes.clear()
        _scopes[key] = scope
    return batch, incarnation, _scopes[key]


def _name_ok(name: str) -> bool:
    try:
        topology.check_name(name, what="service")
    except ValueError:
        return False
    return True


class RawTaskMessage(Protocol):
    """The parts of a kombu message the pre-decode check reads."""

    @property
    def body(self) -> Any: ...

    @property
    def content_type(self) -> str | None: ...

    @property
    def content_encoding(self) -> str | None: ...

    @property
    def headers(self) -> dict[str, Any] | None: ...


def check_task_message(message: RawTaskMessage, *, max_bytes: int) -> None:
    """Raise BadMessage unless ``message`` is a well-formed fetch_batch task within ``max_bytes``."""
    body = message.body if isinstance(message.body, bytes) else str(message.body).encode()
    if len(body) > max_bytes:
        raise BadMessage(f"oversized: {len(body)} bytes > limit {max_bytes}")
    headers = message.headers or {}
    if headers.get("task") != topology.TASK_NAME:
        raise BadMessage(f"not a {topology.TASK_NAME} task message (task header {headers.get('task')!r})")
    if message.content_type != CONTENT_TYPE:
        raise BadMessage(f"content_type {message.content_type!r} is not {CONTENT_TYPE}")
    if message.content_encoding not in ("utf-8", "utf8", None, ""):
        raise BadMessage(f"content_encoding {message.content_encoding!r} is not utf-8")
    try:
        obj = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadMessage(f"not JSON: {exc}") from exc
    if not isinstance(obj, list) or len(obj) != 3:
        raise BadMessage("wrong schema: a Celery body is [args, kwargs, embed]")
    parse_task_args(obj[0], obj[1])


# --- the runtime of this worker process ----------------------------------------------------------------
def start_runtime(*, slots: int | None = None) -> FetchRuntime:
    """Create and start this process's runtime (idempotent). The node comes from ``CRAWLFLEET_NODE``."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            node = topology.check_name(os.environ.get("CRAWLFLEET_NODE", "default"), what="node")
            _runtime = FetchRuntime(current_settings(), node=node, slots=slots or 1, reserved=reserved_count)
            _runtime.start()
        return _runtime


def stop_runtime() -> None:
    global _runtime
    with _runtime_lock:
        if _runtime is not None:
            _runtime.close()
            _runtime = None


@app.task(name=topology.TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def fetch_batch(self: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        batch, incarnation, scope = parse_task_args(list(args), kwargs)
    except BadMessage as exc:
        log.warning("dead-lettering task %s: %s", getattr(self.request, "id", "?"), exc)
        raise Reject(str(exc), requeue=False) from exc
    runtime = start_runtime()
    try:
        return runtime.run_batch(batch, incarnation=incarnation, scope=scope)
    except Exception as exc:
        # A fetcher bug must not lose the batch: report every URL unfinished so it is re-queued.
        log.exception("batch %d failed; reporting it unfinished", batch.serial)
        report = BatchReport(batch.serial, batch.fetcher_id, 0, 0.0, unfinished=list(batch.tasks))
        runtime.outbox.put_report(batch.service, report).wait()
        return {"serial": batch.serial, "failed": repr(exc)}


def send_batch(
    celery_app: Celery,
    producer: Producer,
    batch: Batch,
    *,
    node: str,
    incarnation: str | None,
    scope_json: dict[str, Any] | None,
    expires_s: float | None = None,
) -> None:
    """Publish ``batch`` to ``fetch.<node>`` (raises on a broker error; the caller retries)."""
    celery_app.send_task(
        topology.TASK_NAME,
        args=[batch.to_json()],
        kwargs={"incarnation": incarnation, "scope": scope_json},
        queue=topology.fetch_queue(node),
        producer=producer,
        task_id=f"{batch.service}-{batch.serial}",
        expires=expires_s if expires_s and expires_s > 0 else None,
        retry=False,
        ignore_result=True,
    )
