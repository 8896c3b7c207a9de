"""The host-stats job's mapper and reducer bodies (``mr_host_stats``): pages, bytes, errors and status
classes per host, as plain functions over fetch results."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fetchers.records import FetchResult
from pipeline.urls import host_of, normalize

HOST_STAT_FIELDS = ("pages", "ok", "errors", "bytes", "wire_bytes", "s2xx", "s3xx", "s4xx", "s5xx")


def host_stat_value(result: FetchResult) -> tuple[str, list[int]] | None:
    """(host, counters in HOST_STAT_FIELDS order) for one fetch result."""
    url = normalize(result.url)
    if url is None:
        return None
    status = result.status
    klass = [int(200 <= status < 300), int(300 <= status < 400), int(400 <= status < 500), int(status >= 500)]
    errors = int(bool(result.error_class) or status >= 400)
    return host_of(url), [
        1,
        int(result.ok),
        errors,
        result.body_bytes or len(result.body),
        result.wire_bytes,
        *klass,
    ]


def sum_host_values(values: Iterable[Sequence[int]]) -> list[int]:
    total = [0] * len(HOST_STAT_FIELDS)
    for v in values:
        for i, x in enumerate(v):
            total[i] += x
    return total


def host_stats_record(host: str, total: Sequence[int]) -> dict[str, Any]:
    return {"host": host, **dict(zip(HOST_STAT_FIELDS, total, strict=True))}
