"""The per-batch state the fetch engine (``fetchers.engine``) keeps while a batch runs, and the failure
that ends one URL's fetch (an error class and message, raised inside the engine, never out of it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fetchers.records import Batch, FetchResult, UrlTask


class Fail(Exception):
    """Ends one URL's fetch with ``error_class``; the engine turns it into a result."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message


@dataclass(slots=True)
class BatchCtx:
    batch: Batch
    on_result: Callable[[FetchResult], None]
    unfinished: list[UrlTask] = field(default_factory=list)
    host_ips: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # host -> origin, for robots back-offs
    failed_hosts: dict[str, Fail] = field(default_factory=dict)  # DNS/SSRF failures, once per host
    pages: int = 0
    fence: Callable[[], bool] | None = None  # False: the batch's lease may be gone, start no more URLs
    # Early host release (see run_batch): URLs of each host still without a result, the hosts with a
    # URL handed back (those wait for the batch's end), and the callback.
    host_left: dict[str, int] = field(default_factory=dict)
    held_hosts: set[str] = field(default_factory=set)
    on_host_done: Callable[[str, float, str], None] | None = None
