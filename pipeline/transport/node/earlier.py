"""The URLs a worker process answered in an earlier lease epoch, so that it never fetches them again
after its lease lapsed.

A node stopped (or starved) right after finishing some requests still holds their results: the next
chunk would have stored them (``chunks.BatchChunks``). The dispatcher, hearing nothing, expires the
batch and re-queues every URL the store does not show settled, those among them. When the node comes
back it stores them, and the dispatcher may hand some of them straight back to it in a new batch (it
is the node with free slots). Fetching them again would be a request the server already answered, sent
by the process that answered it (seen from the access log: one node asking for the same page 1.5 s
apart, across a 1 s stop). So a batch of a later epoch does not fetch a URL this process answered in an
earlier one: it waits until the earlier batch has stored its results, then hands the URL back
unfinished, and the dispatcher's re-queue leaves out what the store shows settled
(``pipeline.frontier.answered``). A URL the earlier batch could not store comes back and is fetched
(``forget``).

Only an answer counts: a URL handed back unfinished (``fetchers.report.RETRY_LATER``: fenced before it
was sent, host deferred, robots.txt unavailable, DNS down for now) was not answered, and remembering it
would hand it back for ever, from every node whose lease lapsed while it held the URL (a crawl under a
stalled broker never ended: both nodes handed 14 never-requested URLs back to each other ~35k times).

Within one epoch nothing is held back (a re-crawl may ask for the same URL again a second later). Runs
on the node's fetch loop only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence

from fetchers.records import FetchResult, UrlTask
from fetchers.report import RETRY_LATER

MEMORY = 8192  # answered URLs remembered (more than a node holds in flight and in unstored chunks)


class EarlierAnswers:
    def __init__(self, limit: int = MEMORY) -> None:
        self._limit = limit
        self._by_url: OrderedDict[int, tuple[int, Hashable]] = OrderedDict()  # url id -> (epoch, batch key)

    def record(self, result: FetchResult, epoch: int, batch: Hashable) -> None:
        """``result`` came in lease epoch ``epoch`` in the batch keyed ``batch``: remembered when it is an
        answer (not a URL handed back unfinished)."""
        if result.error_class in RETRY_LATER:
            return
        url_id = result.url_id
        self._by_url[url_id] = (epoch, batch)
        self._by_url.move_to_end(url_id)
        while len(self._by_url) > self._limit:
            self._by_url.popitem(last=False)

    def forget(self, url_ids: Iterable[int]) -> None:
        """These answers could not be stored: they go back unfinished and may be fetched again."""
        for url_id in url_ids:
            self._by_url.pop(url_id, None)

    def split(
        self, tasks: Sequence[UrlTask], epoch: int
    ) -> tuple[list[UrlTask], list[UrlTask], set[Hashable]]:
        """(the tasks to fetch, those answered here in an earlier epoch, the keys of the batches that
        answered them)."""
        fetch: list[UrlTask] = []
        again: list[UrlTask] = []
        earlier: set[Hashable] = set()
        for t in tasks:
            seen = self._by_url.get(t.url_id)
            if seen is not None and seen[0] < epoch:
                again.append(t)
                earlier.add(seen[1])
            else:
                fetch.append(t)
        return fetch, again, earlier
