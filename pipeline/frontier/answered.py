"""The frontier as the dispatcher sees it in a crawl: a re-queue never brings back an answered URL.

``AnsweredFilter`` wraps a ``Frontier`` as dispatch's ``FrontierLike``. When an expired batch is
re-queued, its URLs that already have a final result (``answered``, kept by the crawl core) are left
out, and so are those ``settled`` reports as recorded in the store (fleet nodes store their own
outcomes, so a node may die after storing a batch and before its reply arrives). Everything else is
passed through unchanged. Pure; ``settled`` is the caller's look-up.

May import: fetchers (records) and this room (frontier).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from fetchers.records import UrlTask
from pipeline.frontier.frontier import Frontier


class AnsweredFilter:
    """The frontier as the dispatcher sees it: a re-queue never brings back a URL that already has a
    result (an expired batch's answered URLs must not be fetched a second time)."""

    def __init__(
        self,
        frontier: Frontier,
        answered: set[int],
        *,
        settled: Callable[[Sequence[UrlTask]], set[int]] | None = None,
    ) -> None:
        self._frontier = frontier
        self._answered = answered
        # Where results can be recorded without the dispatcher hearing of them (fleet nodes store their
        # own outcomes): the URL ids of a re-queue the store shows settled already.
        self._settled = settled

    def lease(self, fetcher_id: str, n: int, now: float) -> list[UrlTask]:
        return self._frontier.lease(fetcher_id, n, now)

    def release(self, fetcher_id: str, now: float, *, host_delays: Mapping[str, float] | None = None) -> None:
        self._frontier.release(fetcher_id, now, host_delays=host_delays)

    def requeue(self, fetcher_id: str, tasks: Sequence[UrlTask]) -> None:
        back = [t for t in tasks if t.url_id not in self._answered]
        if back and self._settled is not None:
            done = self._settled(back)
            back = [t for t in back if t.url_id not in done]
        self._frontier.requeue(fetcher_id, back)

    def available(self, now: float) -> int:
        return self._frontier.available(now)
