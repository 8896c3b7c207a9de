"""Item files at a root URI (a local path, ``file://``, ``hdfs://``, ``s3://``: fsspec through
``pipeline.storage.uris``, as the fleet's segments), each written whole.

The fleet's extract tasks write one item file per segment here (jobs/plugged.py); the embedded crawl's
``ItemLog`` converts its closed JSONL files to Parquet with ``to_parquet``. Every file appears whole or
not at all: it is written under a temporary name beside its final one and moved into place (on object
stores, where a put is atomic already, the move is a copy). Parquet columns: ``type``, ``plugin``,
``url``, ``final_url``, ``fetched_at``, ``digest`` and ``item``, a struct of the item's fields when
pyarrow can type them across the file's items, else the item's JSON text.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import fsspec

from pipeline.storage import uris

_COLUMNS = ("type", "plugin", "url", "final_url", "fetched_at", "digest")


def filesystem(root: str) -> tuple[Any, str]:
    """``(fsspec filesystem, path)`` of a local path (relative ones too) or a storage URI (``file://``,
    ``hdfs://`` through WebHDFS, ``s3://``: ``pipeline.storage.uris``, as segments are opened)."""
    if "://" not in root:
        return fsspec.filesystem("file"), os.path.abspath(root).rstrip("/") or "/"
    loc = uris.locate(root)
    return loc.fs, loc.path.rstrip("/") or "/"


def write_whole(fs: Any, path: str, data: bytes) -> None:
    """``data`` at ``path``, appearing whole: written under a temporary name, then moved into place."""
    parent = path.rsplit("/", 1)[0]
    fs.makedirs(parent, exist_ok=True)
    tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
    with fs.open(tmp, "wb") as fh:
        fh.write(data)
    try:
        fs.mv(tmp, path)
    except Exception:
        fs.rm(tmp)
        raise


def parquet_bytes(lines: Iterable[bytes]) -> bytes:
    """The Parquet file of item JSON lines (``pipeline.plugins.records``); torn lines are skipped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [obj for obj in _objects(lines)]
    cols: dict[str, list[Any]] = {name: [r.get(name) for r in rows] for name in _COLUMNS}
    items = [r.get("item") for r in rows]
    try:
        item_col: Any = pa.array(items) if any(items) else pa.array([json.dumps(x) for x in items], pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # fields whose types differ between items: keep the JSON
        item_col = pa.array([json.dumps(x, ensure_ascii=False) for x in items], pa.string())
    table = pa.table({**{k: pa.array(v) for k, v in cols.items()}, "item": item_col})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def _objects(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if not line.endswith(b"\n"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("item"), dict):
            yield obj


def read_items(root: str) -> Iterator[dict[str, Any]]:
    """Every item under ``root`` (``*.jsonl`` files, and ``*.parquet`` files that have no JSONL twin), in
    file-name order. A torn JSONL line is skipped."""
    fs, base = filesystem(root)
    if not fs.exists(base):
        return
    names = sorted(p for p in fs.find(base)
                   if not p.rsplit("/", 1)[-1].startswith(".") and not p.endswith(".errors.jsonl"))  # fmt: skip
    jsonl = {p.removesuffix(".jsonl") for p in names if p.endswith(".jsonl")}
    for path in names:
        if path.endswith(".jsonl"):
            with fs.open(path, "rb") as fh:
                yield from _objects(fh)
        elif path.endswith(".parquet") and path.removesuffix(".parquet") not in jsonl:
            yield from _parquet_rows(fs, path)


def _parquet_rows(fs: Any, path: str) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as fh:
        table = pq.read_table(fh)
    for row in table.to_pylist():
        item = row.get("item")
        if isinstance(item, str):
            row["item"] = json.loads(item)
        elif isinstance(item, dict):
            row["item"] = {k: v for k, v in item.items() if v is not None}
        yield row
