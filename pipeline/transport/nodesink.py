"""Where a fleet fetch node puts a batch's pages before it replies (the design card's loop).

For each batch the node, not the dispatcher:
1. writes every result, body included, to a **segment** on shared storage, as
   ``SEGMENTS/NODE/SERVICE-SERIAL-ISSUEDMS.jsonl.part``;
2. records the final outcomes, pages included, in the **store** (HBase, or SQLite on one box): the
   store applies an outcome only while its URL is PENDING, so a re-fetched URL is stored once;
3. renames the segment to ``.jsonl``: closed, for the link jobs. A closed segment's URLs are settled.
A node killed before the rename leaves a ``.part``; the node adopts it when it starts again (or the
link jobs do, once it is ``ABANDON_S`` old), so the pages it holds still give their links.
Only then does the node send its one JSON reply without bodies (replies.py). WARC, when the
dispatcher asks for it (``SinkSpec.warc``), is written by the node's fetchers from the wire as they
fetch (``runtime.FetchRuntime``, ``storage.warc.live_writer``), under ``WARC/NODE``.

``SinkSpec`` travels in the task message: the dispatcher names its store and segment directory, and
a node may override either with its own settings (a different mount point, the HBase address as
seen from that machine). The sink does blocking I/O: the runtime calls it on a thread of its own.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_not_exception_type,
    stop_after_delay,
    wait_exponential_jitter,
)

from fetchers.records import Batch, FetchResult
from pipeline.crawl.outcome import is_final, outcome_of
from pipeline.settings import Settings
from pipeline.storage.base import Outcome, Store
from pipeline.storage.factory import DB_NAME, from_spec
from pipeline.storage.journal import journal_parts

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".jsonl"
PART_SUFFIX = ".part"
ABANDON_S = 120.0  # a .part this old belongs to a node that died (a batch writes its .part at once)


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """Where a batch's pages go: a store spec (``sqlite:PATH`` or ``hbase://HOST:PORT/PREFIX``), the
    segments directory, and a WARC directory ("" = no WARC)."""

    store: str
    segments: str
    warc: str = ""
    keep_body: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "segments": self.segments,
            "warc": self.warc,
            "keep_body": self.keep_body,
        }

    @classmethod
    def from_json(cls, obj: Any) -> SinkSpec | None:
        """The spec, or None for None; ValueError on anything but what ``to_json`` makes."""
        if obj is None:
            return None
        if not isinstance(obj, dict) or set(obj) != {"store", "segments", "warc", "keep_body"}:
            raise ValueError("sink must be {store, segments, warc, keep_body}")
        store, segments, warc, keep = obj["store"], obj["segments"], obj["warc"], obj["keep_body"]
        if not all(isinstance(x, str) for x in (store, segments, warc)) or not isinstance(keep, bool):
            raise ValueError("sink store/segments/warc must be strings, keep_body a boolean")
        if not (store.startswith("sqlite:/") or store == "hbase" or store.startswith("hbase://")):
            raise ValueError(
                f"sink store {store[:80]!r}: expected sqlite:/ABS/PATH or hbase://HOST:PORT/PREFIX"
            )
        for path in (segments, warc):
            if path and (not path.startswith("/") or "\x00" in path or "/../" in f"{path}/"):
                raise ValueError(f"sink path {path[:80]!r} must be absolute, without '..'")
        if not segments:
            raise ValueError("sink segments directory is required")
        return cls(store, segments, warc, keep)

    def overridden(self, *, store: str = "", segments: str = "") -> SinkSpec:
        """This spec with a node's own settings in place of the dispatcher's, where it has them."""
        return SinkSpec(store or self.store, segments or self.segments, self.warc, self.keep_body)


@dataclass(frozen=True, slots=True)
class Receipt:
    """What the sink did with one batch: the closed segment (absolute path) and the outcomes stored."""

    segment: str
    stored: int


def segment_name(batch: Batch) -> str:
    return f"{batch.service}-{batch.serial:09d}-{int(batch.issued_at * 1000)}{SEGMENT_SUFFIX}"


class NodeSink:
    """One per fetch-node thread and spec. Not thread-safe: call it from one thread."""

    def __init__(self, spec: SinkSpec, *, node: str, open_retry_s: float = 180.0, adopt: bool = True) -> None:
        """``adopt``: close the ``.part`` segments a killed life of this node left (only the first sink
        of a spec in a process may: a later one would take the parts its siblings are writing)."""
        self.spec = spec
        self.node = node
        self.open_retry_s = open_retry_s
        self.directory = Path(spec.segments) / node
        self.directory.mkdir(parents=True, exist_ok=True)
        self._store: Store | None = None
        for part in self.directory.glob(f"*{SEGMENT_SUFFIX}{PART_SUFFIX}") if adopt else ():
            adopt_part(part)  # this node's previous life was killed while it stored a batch

    @property
    def store(self) -> Store:
        if self._store is None:  # opened lazily: a node that never gets a batch never connects
            self._store = self._open()
        return self._store

    def _open(self) -> Store:
        """Open the store, waiting out an outage (a restarting Thrift gateway refuses connections for a
        while): a batch waits here rather than fail and be fetched again elsewhere. A bad spec fails."""
        retrying = Retrying(
            retry=retry_if_not_exception_type(ValueError), stop=stop_after_delay(self.open_retry_s),
            wait=wait_exponential_jitter(initial=0.2, max=5.0), before_sleep=before_sleep_log(log, logging.WARNING),
            reraise=True,
        )  # fmt: skip
        for attempt in retrying:
            with attempt:
                return from_spec(self.spec.store)
        raise AssertionError("unreachable")  # pragma: no cover - Retrying either returns or raises

    def write_batch(self, batch: Batch, results: Sequence[FetchResult]) -> Receipt:
        """Write the segment as ``.part``, record the final outcomes in the store, then rename the segment
        into place: a closed segment's URLs are always settled in the store, and its mtime says when.
        Raises on I/O trouble (the caller then reports the batch unfinished, so every URL of it is
        fetched again elsewhere); a ``.part`` left by a kill is adopted later (``adopt_part``)."""
        final = self.directory / segment_name(batch)
        part = final.with_name(final.name + PART_SUFFIX)
        outcomes: list[Outcome] = []
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for result in results:
                line, packed = journal_parts(result)
                _write_all(fd, line)
                if is_final(result):
                    outcomes.append(outcome_of(result, keep_body=self.spec.keep_body, packed=packed))
        finally:
            os.close(fd)
        if outcomes:
            self.store.record_results(outcomes)
            self.store.flush()
        os.utime(part)  # the segment's mtime is when its outcomes were settled (fault accounting reads it)
        os.replace(part, final)
        return Receipt(str(final), len(outcomes))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def adopt_part(part: Path) -> Path:
    """Close a ``.part`` segment a killed node left behind, so the link jobs read the pages it holds:
    a torn last line is cut off, and its mtime says it was closed now (its URLs may not be settled in
    the store: the dispatcher re-issues them, and the store keeps the first outcome)."""
    data = part.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) != len(data):
        with open(part, "r+b") as fh:
            fh.truncate(len(whole))
    os.utime(part)
    final = part.with_name(part.name.removesuffix(PART_SUFFIX))
    os.replace(part, final)
    log.warning("adopted %s (%d bytes) left by a killed node", final, len(whole))
    return final


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def crawl_sink(settings: Settings, out_dir: Path) -> SinkSpec:
    """The sink of the crawl in ``out_dir``, as its dispatcher names it to nodes and the link jobs find it:
    the crawl's store, ``fleet.segments_dir`` (default OUT/node-segments) and OUT/warc when WARC is on."""
    out = out_dir.resolve()
    st = settings.store
    if st.kind == "hbase":
        store = f"hbase://{st.hbase_host}:{st.hbase_port}/{st.hbase_prefix}"
    else:
        store = f"sqlite:{out / DB_NAME}"  # the dispatcher's own path (its directory may not exist yet)
    segments = settings.fleet.segments_dir or str(out / "node-segments")
    warc = str(out / "warc") if st.warc else ""
    return SinkSpec(store, str(Path(segments).resolve()), warc, settings.fetch.keep_body)
