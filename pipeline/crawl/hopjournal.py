"""The hops of redirect chains in flight, journaled as they are taken, so that a kill between two hops
costs only the hop in flight.

In the embedded crawl the fetcher follows a chain in the crawl's process (``RedirectBook.gate``), and
the chain's result is journaled only when the chain ends. Killed between hops, the crawl would resume
with the chain's first URL still pending and ask the server again for hops it had answered. So each
hop the gate approves is written here (one JSON line, before its request is sent) as the result the
chain would have given had it stopped there: the task's URL, the hops answered so far, ``final_url`` =
the target about to be requested (the shape of a redirect a fetch process stops at). On resume, a chain
whose task has no outcome in the store (its end never reached the journal) is applied from its last hop:
the hops answered are settled, the target goes through the link path and is fetched again (it was in
flight). The status of an interrupted hop is not kept: it is recorded as 302. The file is emptied at a
checkpoint with no chain in flight, and after a resume has applied it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from fetchers.records import FetchResult, UrlTask
from fetchers.schema import SchemaError
from pipeline.storage.base import Store, UrlState

INTERRUPTED_STATUS = 302
WHY = "redirect chain interrupted at this hop (the crawl stopped); the hop's own status is not kept"


def provisional(task: UrlTask, chain: Sequence[str], target: str, *, at: float) -> FetchResult:
    """What ``task``'s chain gives if it ends before ``target`` is answered: a redirect stopped there."""
    return FetchResult(url=task.url, url_id=task.url_id, depth=task.depth, final_url=target,
                       redirects=list(chain), status=INTERRUPTED_STATUS, error_message=WHY, fetched_at=at,
                       redirect_hops=task.redirect_hops, link_meta=task.link_meta)  # fmt: skip


class HopJournal:
    def __init__(self, path: Path, *, wall: Callable[[], float] = time.time) -> None:
        self.path = path
        self.wall = wall
        self._fd: int | None = None

    def hop(self, task: UrlTask, chain: list[str], target: str) -> None:
        """``RedirectBook.on_hop``: journal the chain's ``provisional`` result (the OS has the line on
        return: a killed process loses nothing)."""
        result = provisional(task, chain, target, at=self.wall())
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, json.dumps(result.to_json(), separators=(",", ":")).encode() + b"\n")

    def interrupted(self, store: Store) -> list[FetchResult]:
        """The last hop of every journaled chain whose task the store still holds pending (or not at all)."""
        last: dict[int, FetchResult] = {}
        if not self.path.exists():
            return []
        for line in self.path.read_bytes().splitlines():
            try:
                res = FetchResult.from_json(json.loads(line))
            except (ValueError, SchemaError):
                continue  # a line cut by the kill
            last[res.url_id] = res
        if not last:
            return []
        rows = store.get_urls([r.url for r in last.values()])
        return [r for r in last.values() if (row := rows.get(r.url)) is None or row.state == UrlState.PENDING]

    def clear(self) -> None:
        """Forget every hop (no chain in flight, or the resume has applied them)."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        elif self.path.exists():
            self.path.unlink()

    @property
    def written(self) -> bool:
        return self._fd is not None and os.fstat(self._fd).st_size > 0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
