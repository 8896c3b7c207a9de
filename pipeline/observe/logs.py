"""Structured logging: one line per event, as ``key=value`` text or as JSON (``--log-json``).

Every long-running command calls ``add_arguments(parser)`` and then ``setup_from_args(args)`` (or
``setup_logging`` directly). Code logs events through the standard ``logging`` module; structured
fields go in ``extra={"fields": {...}}`` or through ``event(logger, "name", key=value)``:

    log = logging.getLogger(__name__)
    event(log, "batch.done", fetcher="f1", n=64, secs=1.25)

Text:  ``2026-11-22T10:00:00.123Z INFO pipeline.dispatch batch.done fetcher=f1 n=64 secs=1.25``
JSON:  ``{"ts": "2026-11-22T10:00:00.123Z", "level": "INFO", "logger": "pipeline.dispatch",
"msg": "batch.done", "fetcher": "f1", "n": 64, "secs": 1.25}``

A record never spans lines: newlines in messages and tracebacks are escaped, so log shippers and
``grep`` see one event per line.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_HANDLER_NAME = "crawlfleet"
# LogRecord attributes that are not user fields.
_STD_ATTRS = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime"}


def _timestamp(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    extra = getattr(record, "fields", None)
    if isinstance(extra, Mapping):
        out.update(extra)
    for key, value in vars(record).items():
        if key not in _STD_ATTRS and key != "fields":
            out[key] = value
    return out


def _one_line(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


class TextFormatter(logging.Formatter):
    """``TS LEVEL logger message k=v ...``; values with spaces or quotes are JSON-quoted."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record.created), record.levelname, record.name, _one_line(record.getMessage())]
        for key, value in _fields(record).items():
            parts.append(f"{key}={_text_value(value)}")
        if record.exc_info:
            parts.append("exc=" + json.dumps(self.formatException(record.exc_info)))
        if record.stack_info:
            parts.append("stack=" + json.dumps(record.stack_info))
        return " ".join(parts)


def _text_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int | bool) or value is None:
        return str(value)
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    if text and not any(c in text for c in ' "=\n\r\\'):
        return text
    return json.dumps(text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, then the event's fields (and exc)."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _fields(record).items():
            obj.setdefault(key, value)
        if record.exc_info:
            obj["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            obj["stack"] = record.stack_info
        # json.dumps escapes newlines, so the object is always one line.
        return json.dumps(obj, default=str, ensure_ascii=False)


def setup_logging(*, level: str | int = "INFO", json_lines: bool = False, stream: IO[str] | None = None) -> None:
    """Install one handler on the root logger (replacing a previous call's). Idempotent."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # Chatty libraries stay at WARNING unless we debug them on purpose.
    for name in ("asyncio", "urllib3", "matplotlib", "PIL", "aiohttp.access", "kombu", "amqp", "pika"):
        logging.getLogger(name).setLevel(logging.WARNING)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` and ``--log-json`` for a sub-command."""
    group = parser.add_argument_group("logging")
    group.add_argument("--log-level", default="INFO", type=str.upper, choices=LEVELS, help="minimum level")
    group.add_argument("--log-json", action="store_true", help="log one JSON object per line")


def setup_from_args(args: argparse.Namespace, *, stream: IO[str] | None = None) -> None:
    setup_logging(
        level=getattr(args, "log_level", "INFO"), json_lines=bool(getattr(args, "log_json", False)), stream=stream
    )


def event(logger: logging.Logger, name: str, /, *, level: int = logging.INFO, **fields: Any) -> None:
    """Log the event ``name`` with structured ``fields`` (cheap when the level is disabled)."""
    if logger.isEnabledFor(level):
        logger.log(level, name, extra={"fields": fields}, stacklevel=2)
