"""What a ``fetch_batch`` task message must look like: checked before Celery decodes it, parsed after.

Both the consumer (``celery_app.FleetConsumer``, before decode) and the task (``tasks.fetch_batch``,
after) call in here; keeping the rules apart from both is what lets neither import the other.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from fetchers.records import Batch
from fetchers.schema import SchemaError
from pipeline.transport.wire import topology
from pipeline.transport.wire.messages import CONTENT_TYPE, BadMessage
from pipeline.transport.wire.sink import SinkSpec
from pipeline.urls import Scope

_scopes: dict[str, Scope | None] = {}


def scope_to_json(scope: Scope | None) -> dict[str, Any] | None:
    if scope is None:
        return None
    return {
        "domains": sorted(scope.domains),
        "allow": [p.pattern for p in scope.allow],
        "deny": [p.pattern for p in scope.deny],
    }


def scope_from_json(obj: Any) -> Scope | None:
    """Rebuild a Scope; raises ValueError on anything but the shape ``scope_to_json`` makes."""
    if obj is None:
        return None
    if not isinstance(obj, dict) or not all(
        isinstance(obj.get(k), list) for k in ("domains", "allow", "deny")
    ):
        raise ValueError("scope must be {domains, allow, deny} lists")
    if not all(isinstance(x, str) for x in obj["domains"] + obj["allow"] + obj["deny"]):
        raise ValueError("scope entries must be strings")
    try:
        return Scope(
            domains=frozenset(d.lower() for d in obj["domains"]),
            allow=tuple(re.compile(p) for p in obj["allow"]),
            deny=tuple(re.compile(p) for p in obj["deny"]),
        )
    except re.error as exc:
        raise ValueError(f"bad scope pattern: {exc}") from exc


def parse_task_args(args: Any, kwargs: Any) -> tuple[Batch, str | None, Scope | None, SinkSpec]:
    """``(batch, incarnation, scope, sink)`` from the task's arguments, or BadMessage saying what is wrong.

    A batch without a sink is refused: nodes store their pages themselves (the design card's loop), so
    a task that does not say where cannot be run; it is dead-lettered, not guessed at."""
    if not isinstance(args, list | tuple) or len(args) != 1 or not isinstance(kwargs, dict):
        raise BadMessage("wrong schema: fetch_batch takes exactly one positional argument (the batch)")
    unknown = set(kwargs) - {"incarnation", "scope", "sink"}
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
    try:
        sink = SinkSpec.from_json(kwargs.get("sink"))
    except ValueError as exc:
        raise BadMessage(f"wrong schema: sink: {exc}") from exc
    if sink is None:
        raise BadMessage("wrong schema: no sink (where the node stores the batch's pages)")
    return batch, incarnation, _scopes[key], sink


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
