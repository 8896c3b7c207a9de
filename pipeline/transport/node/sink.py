"""Where a fleet fetch node puts a batch's pages before it replies (the design card's loop).

For each batch the node, not the dispatcher:
1. writes every result, body included, to a **segment** at the crawl's segments URI (a directory,
   ``hdfs://`` or ``s3://``: ``pipeline.storage.segments``), whole, as
   ``NODE/SERVICE-SERIAL-ISSUEDMS-CHUNK.jsonl.part`` (a batch's results come in chunks: node/chunks.py);
2. records the final outcomes, pages included, in the **store** (HBase, or SQLite on one box): the
   store applies an outcome only while its URL is PENDING, so a re-fetched URL is stored once;
3. renames the segment to ``.jsonl``: closed, for the link jobs. A closed segment's URLs are settled.
A node killed before the rename leaves a ``.part``; the node adopts it when it starts again (or the
link jobs do, once it is ``ABANDON_S`` old), so the pages it holds still give their links.
Only then does the node send its one JSON reply without bodies (replies.py). WARC, when the
dispatcher asks for it (``SinkSpec.warc``), is written by the node's fetchers from the wire as they
fetch (``runtime.FetchRuntime``, ``storage.warc.live_writer``), under ``WARC/NODE``.

``SinkSpec`` (``pipeline.transport.wire.sink``) travels in the task message: the dispatcher names its store
and segments URI, and a node may override either with its own settings (a different mount point, the HBase
address as seen from that machine). The sink does blocking I/O: the runtime calls it on a thread of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_not_exception_type,
    stop_after_delay,
    wait_exponential_jitter,
)

from fetchers.records import Batch, FetchResult
from pipeline.crawl.outcome import is_final, outcome_of
from pipeline.storage.base import Outcome, Store
from pipeline.storage.factory import from_spec
from pipeline.storage.journal import journal_parts
from pipeline.storage.segments import PART_SUFFIX, SEGMENT_SUFFIX, Segments
from pipeline.transport.wire.sink import SinkSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Receipt:
    """What the sink did with one batch: the closed segment (its URI) and the outcomes stored."""

    segment: str
    stored: int


def segment_name(batch: Batch, chunk: int = 0) -> str:
    """``SERVICE-SERIAL-ISSUEDMS-CHUNK.jsonl``: a batch's results come in chunks (node/chunks.py)."""
    return f"{batch.service}-{batch.serial:09d}-{int(batch.issued_at * 1000)}-{chunk:04d}{SEGMENT_SUFFIX}"


class NodeSink:
    """One per fetch-node thread and spec. Not thread-safe: call it from one thread."""

    def __init__(self, spec: SinkSpec, *, node: str, open_retry_s: float = 180.0, close_retry_s: float = 10.0,
                 adopt: bool = True) -> None:  # fmt: skip
        """``adopt``: close the ``.part`` segments a killed life of this node left (only the first sink
        of a spec in a process may: a later one would take the parts its siblings are writing)."""
        self.spec = spec
        self.node = node
        self.open_retry_s = open_retry_s
        self.close_retry_s = close_retry_s
        self.segments = Segments(spec.segments)
        self._store: Store | None = None
        for part in self.segments.parts(node) if adopt else ():
            self.segments.adopt(part)  # this node's previous life was killed while it stored a batch

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

    def write_batch(self, batch: Batch, results: Sequence[FetchResult], *, chunk: int = 0) -> Receipt:
        """Write the segment whole as ``.part``, record the final outcomes in the store, then rename the
        segment into place: a closed segment's URLs are always settled in the store. Raises on I/O trouble
        before the store is written (the caller then reports the chunk's URLs unfinished, so they are
        fetched again elsewhere); after it, never (``_close``). A ``.part`` left by a kill is adopted later
        (``Segments.adopt``)."""
        outcomes: list[Outcome] = []
        lines: list[bytes] = []
        for result in results:
            line, packed = journal_parts(result)
            lines.append(line)
            if is_final(result):
                outcomes.append(outcome_of(result, keep_body=self.spec.keep_body, packed=packed))
        part = self.segments.write_part(self.node, segment_name(batch, chunk), b"".join(lines))
        if outcomes:
            self.store.record_results(outcomes)
            self.store.flush()
        return Receipt(self.segments.uri(self._close(part)), len(outcomes))

    def _close(self, part: str) -> str:
        """Rename ``part`` into place, its outcomes already in the store. From here the chunk is settled: a
        failed rename is tried again, and one that keeps failing leaves the ``.part`` for the link jobs to
        adopt under the same key (``Segments.closed``); handing the URLs back instead would have them
        fetched again although their pages are stored."""
        retrying = Retrying(stop=stop_after_delay(self.close_retry_s), wait=wait_exponential_jitter(initial=0.2, max=2.0),
                            before_sleep=before_sleep_log(log, logging.WARNING), reraise=True)  # fmt: skip
        try:
            for attempt in retrying:
                with attempt:
                    return self.segments.close_part(part)
        except Exception:
            log.exception("segment %s stays a .part (stored; the link jobs adopt it)", self.segments.uri(part))
        return part.removesuffix(PART_SUFFIX)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
