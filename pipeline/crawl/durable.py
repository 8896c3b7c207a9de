"""Where a crawl core's processed results become durable: outcomes into the store (directly, or on the
write-behind thread), pages into the live WARC, the plugins' items (``ItemLog``, committed first), and the
journal checkpoint after them.

The checkpoint is the journal position below which every result is applied in the store; with
write-behind it is queued after every earlier outcome, so it never passes an unapplied one
(pipeline/storage/writebehind.py). Used from the crawl core's thread only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fetchers.records import UrlTask
from pipeline.settings import Settings
from pipeline.storage.base import Outcome, Store, UrlState
from pipeline.storage.itemlog import ItemLog
from pipeline.storage.journal import Checkpoint, SegmentWriter
from pipeline.storage.warc import WarcWriter
from pipeline.storage.writebehind import LockedStore, WriteBehind, WriteJob

CHECKPOINT_KEY = "journal_checkpoint"  # store meta: the journal position every result below is applied


class Durable:
    """The journal, the store (behind a lock with write-behind), the optional WARC, the checkpoint."""

    def __init__(
        self, settings: Settings, store: Store, out_dir: Path, *, write_behind: bool, items: ItemLog | None = None
    ) -> None:
        # With write-behind, outcomes are applied on a writer thread; every store call goes through
        # one lock so the two threads never share a transaction (pipeline/storage/writebehind.py).
        self.writer: WriteBehind | None = None
        if write_behind:
            store = LockedStore(store)
            self.writer = WriteBehind(store, checkpoint_key=CHECKPOINT_KEY)
        self.store = store
        self.journal = SegmentWriter(out_dir / "segments")
        # Live WARC output (optional). A page replayed from the journal after a crash may appear twice
        # in the WARC files; `crawlfleet export warc` from the store never duplicates.
        st = settings.store
        self.warc = WarcWriter(out_dir / "warc", max_bytes=st.warc_max_bytes) if st.warc else None
        self._checkpointed = ""
        self.items = items  # the plugins' item log: committed at each checkpoint, before the store hears of it

    def settled(self, tasks: Sequence[UrlTask]) -> set[int]:
        """URL ids of ``tasks`` the store no longer shows PENDING: a fleet node may have recorded them before
        its reply was lost (one look-up each: re-queues are rare)."""
        out = set()
        for t in tasks:
            rec = self.store.get_url(t.url)
            if rec is not None and rec.state is not UrlState.PENDING:
                out.add(t.url_id)
        return out

    def since(self) -> Checkpoint | None:
        """The journal position the store has applied everything below (replay starts there)."""
        return Checkpoint.decode(self.store.get_meta(CHECKPOINT_KEY))

    def record(self, outcomes: Sequence[Outcome]) -> None:
        if self.writer is not None:
            self.writer.submit(WriteJob(outcomes, before=self._write_warc if self.warc else None))
        else:
            self._write_warc(outcomes)
            self.store.record_results(outcomes)

    def unapplied_ids(self) -> set[int] | frozenset[int]:
        """URL ids whose outcome is still on the writer's queue (the store shows them PENDING)."""
        return self.writer.unapplied_ids() if self.writer is not None else frozenset()

    def drain(self) -> None:
        if self.writer is not None:
            self.writer.drain()

    def _write_warc(self, outcomes: Sequence[Outcome]) -> None:
        if self.warc is not None:
            self.warc.write_pages(o.page for o in outcomes if o.page is not None)

    def checkpoint(self) -> None:
        position = self.journal.position().encode()
        if position == self._checkpointed:
            return  # nothing journaled since: spare the store a write (a Thrift round trip on HBase)
        self._checkpointed = position
        if self.items is not None:
            self.items.commit(self.journal.position())
        if self.writer is not None:
            self.writer.submit(WriteJob((), checkpoint=position))  # applied after every earlier job
        else:
            self.store.put_meta(CHECKPOINT_KEY, position)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.journal.close()
        if self.items is not None:
            self.items.close()
        if self.warc is not None:
            self.warc.close()
        self.store.flush()
