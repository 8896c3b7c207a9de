"""The HBase store's shared records: compare-and-set, prefix scans and deletes on the ``meta`` table.

Rows ``k:<key>``, cell ``m:v`` (the same rows ``get_meta``/``put_meta`` use). The swap is Thrift1's
``checkAndPut``, atomic on the region server, so two processes on two machines never both win it; a
missing expected value checks that the cell is absent. Retried like every call (``HBaseStore._call``):
a swap whose reply was lost answers False on the retry, which ``Store.swap_meta`` leaves to the caller.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from Hbase_thrift import Mutation


class HBaseStore(Protocol):
    """What this module uses of ``pipeline.storage.hbase.HBaseStore`` (a protocol: no import cycle)."""

    _names: dict[str, bytes]

    def _call(self, fn: Any) -> Any: ...
    def _delete(self, table: str, keys: Sequence[bytes]) -> None: ...

_COL = b"m:v"


def _row(key: str) -> bytes:
    return b"k:" + key.encode()


def swap(store: HBaseStore, key: str, expected: str | None, new: str) -> bool:
    table = store._names["meta"]
    put = Mutation(column=_COL, value=new.encode(), isDelete=False, writeToWAL=True)
    want = None if expected is None else expected.encode()
    return bool(store._call(lambda c: c.client.checkAndPut(table, _row(key), _COL, want, put, {})))


def scan(store: HBaseStore, prefix: str) -> Iterator[tuple[str, str]]:
    rows = store._call(lambda c: list(c.table("meta").scan(row_prefix=_row(prefix), columns=[_COL])))
    return iter([(key[2:].decode(), data[_COL].decode()) for key, data in rows if _COL in data])


def delete(store: HBaseStore, keys: Sequence[str]) -> None:
    store._delete("meta", [_row(k) for k in keys])
