"""Progress for long commands: a tqdm bar on a terminal, a periodic log line elsewhere.

``CrawlProgress`` reads a ``CrawlStats`` (never the hot path: the caller calls ``update()`` from its
once-a-second loop) and shows pages, pages/s, bytes/s, queue size, errors, and the ETA when the
page budget (``total``, e.g. ``--max-pages``) is known. ``task_progress`` wraps any other long job
(MapReduce jobs, benchmarks) the same way.

Mode ``auto`` draws a bar only when the stream is a terminal; otherwise it logs a ``progress`` event
every ``log_every_s`` seconds so CI logs stay readable. While a bar is open, log records are routed
through ``tqdm.write`` so they do not tear the bar.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TypeVar

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from pipeline.observe.logs import event
from pipeline.observe.stats import CrawlStats

MODES = ("auto", "bar", "log", "off")
_BAR_TOTAL = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
_BAR_OPEN = "{desc}: {n_fmt} pages [{elapsed}{postfix}]"
_log = logging.getLogger("pipeline.observe.progress")
T = TypeVar("T")


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover - loop always returns


def _clock_fmt(seconds: float) -> str:
    """3725 -> '1:02:05'; 65 -> '01:05'."""
    return tqdm.format_interval(seconds)


def _resolve_mode(mode: str, stream: IO[str]) -> str:
    if mode not in MODES:
        raise ValueError(f"progress mode must be one of {MODES}, not {mode!r}")
    if mode != "auto":
        return mode
    isatty = getattr(stream, "isatty", None)
    return "bar" if isatty is not None and isatty() else "log"


class CrawlProgress:
    """A crawl's progress display. Use as a context manager; call ``update()`` about once a second.

    Rates are smoothed (exponential moving average, ``smoothing`` weight on the newest interval) so
    one slow second does not make the ETA jump.
    """

    def __init__(
        self,
        stats: CrawlStats,
        *,
        total: int | None = None,
        mode: str = "auto",
        stream: IO[str] | None = None,
        desc: str = "crawl",
        log_every_s: float = 10.0,
        smoothing: float = 0.3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stats = stats
        self._total = total if total and total > 0 else None
        self._stream = stream if stream is not None else sys.stderr
        self._mode = _resolve_mode(mode, self._stream)
        self._desc = desc
        self._log_every = log_every_s
        self._alpha = smoothing
        self._clock = clock
        self._bar: tqdm[Any] | None = None
        self._redirect: contextlib.ExitStack | None = None
        self._last_t = clock()
        self._last_log_t = self._last_t
        self._last_pages = stats.pages + stats.failed
        self._last_bytes = stats.bytes
        self.pages_per_s = 0.0
        self.bytes_per_s = 0.0

    @property
    def mode(self) -> str:
        return self._mode

    def __enter__(self) -> CrawlProgress:
        if self._mode == "bar":
            self._redirect = contextlib.ExitStack()
            self._redirect.enter_context(logging_redirect_tqdm())
            self._bar = tqdm(
                total=self._total,
                desc=self._desc,
                unit="pg",
                file=self._stream,
                dynamic_ncols=True,
                # Our own smoothed rates and ETA go in the postfix: tqdm's would count the bar's redraws.
                bar_format=_BAR_TOTAL if self._total else _BAR_OPEN,
            )
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self.update(force_log=False)
            self._bar.close()
            self._bar = None
        elif self._mode == "log":
            self.update(force_log=True)
        if self._redirect is not None:
            self._redirect.close()
            self._redirect = None

    def postfix(self) -> dict[str, str]:
        """The fields shown next to the bar (also the ``progress`` log event's fields)."""
        return {
            "pg/s": f"{self.pages_per_s:.0f}",
            "bw": f"{human_bytes(self.bytes_per_s)}/s",
            "queue": str(self._stats.queue),
            "err": str(self._stats.failed),
        } | ({"eta": _clock_fmt(eta)} if (eta := self.eta_s()) is not None else {})

    def update(self, *, force_log: bool = False) -> None:
        """Refresh rates from the stats and redraw (bar) or log (every ``log_every_s``)."""
        now = self._clock()
        done = self._stats.pages + self._stats.failed
        nbytes = self._stats.bytes
        dt = now - self._last_t
        if dt > 0:
            a = self._alpha
            inst_p = (done - self._last_pages) / dt
            inst_b = (nbytes - self._last_bytes) / dt
            first = self.pages_per_s == 0.0 and self.bytes_per_s == 0.0
            self.pages_per_s = inst_p if first else a * inst_p + (1 - a) * self.pages_per_s
            self.bytes_per_s = inst_b if first else a * inst_b + (1 - a) * self.bytes_per_s
            self._last_t, self._last_pages, self._last_bytes = now, done, nbytes
        if self._bar is not None:
            self._bar.n = done
            self._bar.set_postfix(self.postfix(), refresh=False)
            self._bar.refresh()
        elif self._mode == "log" and (force_log or now - self._last_log_t >= self._log_every):
            self._last_log_t = now
            fields: dict[str, Any] = {
                "pages": self._stats.pages,
                "errors": self._stats.failed,
                "pages_per_s": round(self.pages_per_s, 1),
                "bytes_per_s": round(self.bytes_per_s),
                "queue": self._stats.queue,
            }
            eta = self.eta_s()
            if eta is not None:
                fields["total"] = self._total
                fields["eta_s"] = round(eta)
            event(_log, "progress", **fields)

    def eta_s(self) -> float | None:
        """Seconds to reach ``total`` at the smoothed rate; None when unknown."""
        if self._total is None or self.pages_per_s <= 0:
            return None
        remaining = max(self._total - (self._stats.pages + self._stats.failed), 0)
        return remaining / self.pages_per_s


def task_progress(
    iterable: Iterable[T],
    *,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    mode: str = "auto",
    stream: IO[str] | None = None,
) -> Iterator[T]:
    """Iterate with a bar on a terminal (tqdm), silently otherwise; for jobs and benchmarks."""
    out = stream if stream is not None else sys.stderr
    if _resolve_mode(mode, out) != "bar":
        yield from iterable
        return
    with logging_redirect_tqdm():
        yield from tqdm(iterable, total=total, desc=desc, unit=unit, file=out, dynamic_ncols=True)
