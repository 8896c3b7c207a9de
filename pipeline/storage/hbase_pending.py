"""The HBase store's pending reads, apart from ``hbase.py`` to keep each module small: one host's
(``pending_one``, ``Store.pending``) and several hosts' at once for the frontier's refills (#18,
``pending_many``). ``pipelined`` sends several Thrift1 calls on one connection before reading their replies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import happybase
from Hbase_thrift import IllegalArgument, TScan
from Hbase_thrift import IOError as IOError_
from thriftpy2.thrift import TApplicationException, TMessageType

from pipeline.storage.base import UrlRecord, UrlState
from pipeline.storage.hbase_cells import pending_key, refill_record, url_record
from pipeline.storage.rowkey import authority_key, row_key


class HBaseStore(Protocol):
    """What these functions use of ``pipeline.storage.hbase.HBaseStore`` (a protocol: no import cycle)."""

    _names: dict[str, bytes]
    refill_cols: list[bytes]
    url_cols: list[bytes]

    def _call(self, fn: Any) -> Any: ...
    def _delete(self, table: str, keys: Sequence[bytes]) -> None: ...
    def _rows(self, table: str, keys: Sequence[bytes], columns: list[bytes] | None = None) -> dict[bytes, Any]: ...
    def pending(self, host: str, limit: int) -> list[UrlRecord]: ...


def _stop_key(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


def pending_one(store: HBaseStore, host: str, limit: int, *, after: tuple[int, str] | None = None) -> list[UrlRecord]:
    """``Store.pending(host, limit, after=after)``: a prefix scan of the pending table, then one multi-get
    of the crawl-db rows; pending rows whose URL is no longer PENDING (a crash between the state write
    and the row's delete) are skipped and deleted."""
    prefix = authority_key(host) + b"|"
    start = prefix if after is None else pending_key(host, after[0], row_key(after[1])) + b"\x00"
    out: list[UrlRecord] = []
    while len(out) < limit:
        want = limit - len(out)
        keys = store._call(
            lambda c, s=start, w=want: [  # type: ignore[misc]
                k
                for k, _ in c.table("pending").scan(
                    row_start=s, row_stop=_stop_key(prefix), columns=[b"p:x"], limit=w, batch_size=min(w, 1000)
                )
            ]
        )
        if not keys:
            break
        url_keys = [k[len(prefix) + 2 :] for k in keys]
        rows = store._rows("crawldb", url_keys, store.url_cols)
        stale = []
        for pkey, ukey in zip(keys, url_keys, strict=True):
            row = rows.get(ukey)
            if row and row[b"m:s"][0] == UrlState.PENDING:
                out.append(url_record(row))
            elif row:  # done already (a crash between the state write and this delete)
                stale.append(pkey)
        store._delete("pending", stale)
        if len(keys) < want:
            break
        start = keys[-1] + b"\x00"
    return out


def pending_many(store: HBaseStore, hosts: Sequence[str], limit: int) -> dict[str, list[UrlRecord]]:
    """``pending(host, limit)`` for several hosts in a few round trips, for the frontier's refills.

    Three pipelined exchanges whatever the number of hosts (``pipelined``): every host's scanner
    opened, then each one read once (``limit`` rows: a read that returns fewer ends the scan) and
    closed, then one multi-get of the crawl-db rows of every key read. A round trip, not the bytes,
    is what costs here (~0.1 ms of CPU each on this box, measured: syscalls and wake-ups), and a
    per-host read took three or four. The records carry what a refill uses (URL, id, host, depth,
    in-links; the host and depth from the request and the pending key), not a re-crawl state (a
    re-crawl reads ``pending``). A host with a stale pending row in a full read is read again with
    ``pending``, which skips and removes such rows.
    """
    if not hosts:
        return {}
    table = store._names["pending"]
    prefixes = [authority_key(h) + b"|" for h in hosts]

    def scan(c: happybase.Connection) -> list[list[bytes]]:
        opened = pipelined(c.client, [("scannerOpenWithScan", {"tableName": table, "attributes": {},
                            "scan": TScan(startRow=p, stopRow=_stop_key(p), columns=[b"p:x"], caching=limit)})
                            for p in prefixes])  # fmt: skip
        calls: list[tuple[str, dict[str, Any]]] = []
        for sid in opened:
            calls += [("scannerGetList", {"id": sid, "nbRows": limit}), ("scannerClose", {"id": sid})]
        replies = pipelined(c.client, calls)
        return [[r.row for r in rows] for rows in replies[::2]]

    keys_of = dict(zip(hosts, store._call(scan), strict=True))
    url_keys = {pkey: pkey[pkey.index(b"|") + 3 :] for keys in keys_of.values() for pkey in keys}
    crawldb = store._names["crawldb"]
    rows: dict[bytes, dict[bytes, bytes]] = {}
    chunk = list(url_keys.values())
    for i in range(0, len(chunk), 5000):
        part = chunk[i : i + 5000]
        got = store._call(lambda c, k=part: c.client.getRowsWithColumns(crawldb, k, store.refill_cols, {}))  # type: ignore[misc]
        rows.update((r.row, {col: cell.value for col, cell in r.columns.items()}) for r in got)
    out: dict[str, list[UrlRecord]] = {}
    stale: list[bytes] = []
    again: list[str] = []
    for host, keys in keys_of.items():
        records = out[host] = []
        for pkey in keys:
            row = rows.get(url_keys[pkey])
            if row and row[b"m:s"][0] == UrlState.PENDING:
                at = pkey.index(b"|") + 1
                records.append(refill_record(row, host, (pkey[at] << 8) | pkey[at + 1]))
            elif row:  # done already (a crash between the state write and the pending row's delete)
                stale.append(pkey)
        if len(keys) >= limit and len(records) < len(keys):
            again.append(host)  # more rows may follow the stale ones
    store._delete("pending", stale)
    for host in again:
        out[host] = store.pending(host, limit)
    return out


def pipelined(client: Any, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Send every call, flush once, then read every reply in order: one round trip for many calls.

    A Thrift1 server answers one connection's calls in order, one at a time. Requests here are small
    (scanner ids, row keys), so the whole batch sits in the socket buffers while the server answers:
    the two sides never wait on each other's writes. Every reply is read before an error is raised, so
    the connection stays in step; an error of the transport itself propagates at once (the pool then
    drops the connection and ``_call`` retries on a fresh one)."""
    oprot = client._oprot
    for api, kwargs in calls:
        oprot.write_message_begin(api, TMessageType.CALL, client._seqid)
        args = getattr(client._service, api + "_args")()
        for k, v in kwargs.items():
            setattr(args, k, v)
        args.write(oprot)
        oprot.write_message_end()
    oprot.trans.flush()
    out: list[Any] = []
    failed: Exception | None = None
    for api, _ in calls:
        try:
            out.append(client._recv(api))
        except (IllegalArgument, TApplicationException, IOError_) as exc:  # an answer: the stream is in step
            out.append(None)
            failed = failed or exc
    if failed is not None:
        raise failed
    return out
