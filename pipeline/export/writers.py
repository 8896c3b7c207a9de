"""Records out as files at a root (a directory or an fsspec URI): JSONL rotated by size, or Parquet.

``write_records(records, root, fmt=...)`` writes ``PREFIX-00000.jsonl`` ... (a new file past ``max_bytes``)
or ``PREFIX-00000.parquet`` ... (a new file every ``rows_per_file`` records, row groups of 1,000). Each
file is written under a temporary name and moved into place whole (``pipeline.storage.itemfiles``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pipeline.storage.itemfiles import filesystem, write_whole


@dataclass(slots=True)
class Written:
    records: int = 0
    files: list[str] = field(default_factory=list)


def _chunks(records: Iterable[dict[str, Any]], *, limit: int, size: Any) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    used = 0
    for rec in records:
        chunk.append(rec)
        used += size(rec)
        if used >= limit:
            yield chunk
            chunk, used = [], 0
    if chunk:
        yield chunk


def write_records(
    records: Iterable[dict[str, Any]], root: str, *, fmt: str, prefix: str, schema: Any = None,
    max_bytes: int = 256 << 20, rows_per_file: int = 100_000,
) -> Written:
    """Write ``records`` under ``root`` (see the module docstring); ``schema``: a pyarrow schema for Parquet."""
    fs, base = filesystem(root)
    out = Written()
    if fmt == "jsonl":
        lines = (json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for r in records)
        batches = _chunks(({"_": line} for line in lines), limit=max_bytes, size=lambda r: len(r["_"]))
        for n, batch in enumerate(batches):
            path = f"{base}/{prefix}-{n:05d}.jsonl"
            write_whole(fs, path, b"".join(r["_"] for r in batch))
            out.records += len(batch)
            out.files.append(path)
        return out
    if fmt != "parquet":
        raise ValueError(f"format {fmt!r}: expected jsonl or parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    for n, batch in enumerate(_chunks(records, limit=rows_per_file, size=lambda _r: 1)):
        sink = io.BytesIO()
        with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
            for start in range(0, len(batch), 1000):
                writer.write_table(pa.Table.from_pylist(batch[start : start + 1000], schema=schema))
        path = f"{base}/{prefix}-{n:05d}.parquet"
        write_whole(fs, path, sink.getvalue())
        out.records += len(batch)
        out.files.append(path)
    return out


def pages_schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("url", pa.string()), ("final_url", pa.string()), ("status", pa.int32()), ("content_type", pa.string()),
        ("headers", pa.map_(pa.string(), pa.string())), ("fetched_at", pa.float64()), ("digest", pa.string()),
        ("text", pa.string()), ("links", pa.list_(pa.string())),
    ])  # fmt: skip


def for_parquet(page: dict[str, Any]) -> dict[str, Any]:
    """A page record in the form ``pages_schema`` takes (headers as a list of pairs)."""
    return {**page, "headers": list(page["headers"].items())}
