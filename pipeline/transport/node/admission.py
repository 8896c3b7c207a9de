"""Whether a fetch worker process runs a batch it was handed, from the incarnation the batch is addressed
to. Pure.

An incarnation names a process and its lease epoch (``<process>/<epoch>``, the epoch counting the
lease's lapses). A batch addressed to another process was issued before a restart, and the dispatcher
has already re-queued its URLs: it is dropped unfetched. One addressed to an earlier epoch of this
process was issued before a stop or a starved loop and delivered or started only after it, however
late: the dispatcher may have re-issued it already, so it is handed back unfetched (the hand-back
re-queues what was not). A redelivered batch that is already running joins the running fetch whatever
its address.
"""

from __future__ import annotations

import enum

from fetchers.records import Batch
from pipeline.transport.wire.messages import same_process

# A batch as a process remembers it: serials restart at 1 in every fresh crawl store, so the serial alone
# would confuse two crawls' batch N; a redelivered message keeps all three.
BatchKey = tuple[str, int, float]


def batch_key(batch: Batch) -> BatchKey:
    return (batch.service, batch.serial, batch.issued_at)


class Admission(enum.Enum):
    RUN = "run"
    STALE = "stale_incarnation"  # another process's: dropped
    LAPSED = "lapsed"  # an earlier epoch of this process's: handed back


def admit(addressed: str | None, current: str, *, running: bool) -> Admission:
    """``addressed``: the batch's incarnation (None or empty: unaddressed, as the embedded tests send);
    ``current``: this process at the epoch taken for the batch; ``running``: the batch is running here."""
    if not addressed:
        return Admission.RUN
    if not same_process(addressed, current):
        return Admission.STALE
    if addressed != current and not running:
        return Admission.LAPSED
    return Admission.RUN
