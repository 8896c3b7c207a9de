"""The crawl core's side of plugins: each page's items into the crawl's item log, once per page version.

``CrawlCore._apply`` calls ``PageItems.apply`` for every final result, before it buffers the page's links:

* a result no other process prepared with the plugins (the in-process crawl, a result a parse process
  could not take, a replayed one) is prepared here (``pipeline.plugins.prepare.complete``): one parse for
  its links and its items; a page the parse guard quarantined is not parsed;
* a DONE result that is a new page version (``Outcome.page`` set: not a 304 nor an unchanged re-fetch)
  has its item lines appended to the ``ItemLog``, unless it is a replayed result below the log's commit
  (its items are there already: ``pipeline.storage.itemlog``);
* the first plugin error of a page goes on its row (``Outcome.error``, as ``parse_failed`` does), all of
  them to the log at WARNING, and the counts to the crawl's summary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fetchers.records import FetchResult
from pipeline.plugins.chain import PluginSet
from pipeline.plugins.prepare import complete
from pipeline.settings import Settings
from pipeline.storage.base import Outcome, UrlState
from pipeline.storage.itemlog import ItemLog
from pipeline.storage.journal import Checkpoint

log = logging.getLogger(__name__)


def items_dir(settings: Settings, out_dir: Path) -> Path:
    """Where the embedded crawl writes its items: ``plugins.items_root`` (a local path or ``file://``), else
    OUT/items. ValueError for a URI the embedded crawl cannot append to (the fleet's link jobs can)."""
    root = settings.plugins.items_root
    if not root:
        return out_dir / "items"
    if "://" in root and not root.startswith("file://"):
        raise ValueError(f"plugins.items_root {root!r}: the embedded crawl writes items to a local directory "
                         "(a path or file://); remote URIs are for the fleet's link jobs")  # fmt: skip
    return Path(root.removeprefix("file://"))


@dataclass(slots=True)
class ItemCounts:
    pages: int = 0  # page versions that gave at least one item
    items: int = 0
    errors: int = 0  # plugin and item errors
    pages_with_errors: int = 0
    replayed_skipped: int = 0  # replayed pages whose items the log had already


class PageItems:
    """See the module docstring. ``listener(result)`` runs after a page's items are written."""

    def __init__(self, settings: Settings, plugins: PluginSet, items: ItemLog,
                 listener: Callable[[FetchResult], None] | None = None) -> None:  # fmt: skip
        self.settings, self.plugins, self.items, self.listener = settings, plugins, items, listener
        self.counts = ItemCounts()

    def apply(self, result: FetchResult, outcome: Outcome, *, position: Checkpoint | None = None) -> None:
        if outcome.state is not UrlState.DONE:
            return
        complete(result, self.settings, self.plugins)
        out = result.prepared.plugged if result.prepared is not None else None
        if out is None:
            return  # quarantined by the parse guard: kept without links or items
        if out.error_count:
            self._errors(result, outcome, out.errors, out.error_count)
        if outcome.page is None:
            return  # a 304 or an unchanged body: the stored version stands, and so do its items
        committed = self.items.committed
        if position is not None and committed is not None and position < committed:
            self.counts.replayed_skipped += 1
            return
        if out.items:
            self.items.write(out.items)
            self.counts.pages += 1
            self.counts.items += out.count
        if self.listener is not None:
            self.listener(result)

    def _errors(self, result: FetchResult, outcome: Outcome, errors: tuple[str, ...], count: int) -> None:
        self.counts.errors += count
        self.counts.pages_with_errors += 1
        for text in errors:
            log.warning("%s: %s", result.url, text)
        if not outcome.error and errors:
            outcome.error = errors[0] + (f" (and {count - 1} more)" if count > 1 else "")

    def summary(self) -> dict[str, int]:
        c = self.counts
        return {"pages": c.pages, "items": c.items, "errors": c.errors, "pages_with_errors": c.pages_with_errors,
                "replayed_skipped": c.replayed_skipped}  # fmt: skip

