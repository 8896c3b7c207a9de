"""``crawlfleet jobs run --follow``: the link jobs behind an embedded crawl's journal, segment by segment.

Segment closing follows ``pipeline.storage.journal.SegmentWriter``: segments are ``segment-NNNNN.jsonl``; one
is closed once a later one exists (or when the caller says the crawl has ended). ``run_pipelined`` processes
each closed segment on a background thread so that the writer keeps going meanwhile (not stop-the-world).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from jobs.runner import RoundResult


def closed_segments(directory: Path, *, include_last: bool) -> list[Path]:
    """Segments in name order; the newest is still being written unless ``include_last``."""
    segs = sorted(directory.glob("segment-*.jsonl"))
    return segs if include_last else segs[:-1]


def watch_segments(
    directory: Path,
    *,
    done: Callable[[], bool],
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Path]:
    """Yield each segment of ``directory`` once it is closed; the last one once ``done()`` is true."""
    yielded: set[str] = set()
    while True:
        finished = done()  # read before listing, so a segment closed meanwhile is not missed
        for seg in closed_segments(directory, include_last=finished):
            if seg.name not in yielded:
                yielded.add(seg.name)
                yield seg
        if finished:
            return
        sleep(poll_s)


def run_pipelined(
    segments: Iterable[Path], process: Callable[[Path], RoundResult], *, max_queued: int = 2
) -> Iterator[RoundResult]:
    """Process segments on a background thread while the caller keeps producing them.

    ``segments`` is consumed on the caller's thread (it may block waiting for the next closed
    segment); at most ``max_queued`` closed segments wait for processing. Results come back in order.
    An exception in ``process`` is re-raised here.
    """
    todo: queue.Queue[Path | None] = queue.Queue(maxsize=max_queued)
    done: queue.Queue[RoundResult | BaseException | None] = queue.Queue()

    def worker() -> None:
        failed = False
        while (seg := todo.get()) is not None:
            if failed:
                continue  # keep draining so the producer never blocks on a full queue
            try:
                done.put(process(seg))
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                failed = True
                done.put(exc)
        done.put(None)

    thread = threading.Thread(target=worker, name="link-pipeline", daemon=True)
    thread.start()

    def take(item: RoundResult | BaseException | None) -> RoundResult | None:
        if isinstance(item, BaseException):
            todo.put(None)
            raise item
        return item

    for seg in segments:
        todo.put(seg)
        while not done.empty():
            got = take(done.get())
            if got is not None:
                yield got
    todo.put(None)
    while (got := take(done.get())) is not None:
        yield got
    thread.join()
