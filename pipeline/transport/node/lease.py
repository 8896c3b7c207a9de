"""Worker-side fencing of batches against the dispatcher's heartbeat liveness (S1).

The dispatcher expires a node's batches (and re-issues their URLs elsewhere) once it has heard no
heartbeat from the node for ``missed_heartbeats x heartbeat_s``. A worker that was stopped, starved or
cut off from the broker for that long cannot know whether that happened; if it simply went on, every
URL it then fetched could be fetched a second time by the re-issued copy. S1's answer is that the slave
checks with the master before fetching; ours needs no round trip: a worker that knows it has missed
its own heartbeats stops starting URLs of the batches it held, and hands them back unfetched. Both
outcomes are then safe: if the batch was expired the dispatcher drops the hand-back, if it was not the
URLs are re-queued.

``beat`` is called by the publishing thread after each heartbeat the broker has confirmed; ``epoch``
by the fetch loop when a batch starts, and ``holds(epoch)`` before each URL. Whichever thread runs
first after a stop sees the gap, so the fence cannot be raced by a heartbeat sent just after resuming.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class LeaseGuard:
    """Thread-safe. ``limit_s``: the longest heartbeat gap after which the batches held may be gone."""

    def __init__(
        self,
        *,
        limit_s: float,
        quarantine_s: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit_s = limit_s
        self.quarantine_s = quarantine_s
        self._mono = monotonic
        self._lock = threading.Lock()
        self._last_beat = monotonic()
        self._epoch = 0
        self._lapsed_at = float("-inf")  # when the last lapse was seen
        self.lapses = 0

    @classmethod
    def for_heartbeats(cls, *, heartbeat_s: float, missed: int) -> LeaseGuard:
        """Lapse a quarter period before the dispatcher could expire us: it still has to notice, re-issue
        and have another node start the batch, so a lapse at the limit itself is already late enough."""
        return cls(limit_s=max(heartbeat_s * 1.25, heartbeat_s * missed - heartbeat_s / 4), quarantine_s=heartbeat_s)

    def _check(self, now: float) -> None:
        if now - self._last_beat > self.limit_s:
            self._epoch += 1
            self.lapses += 1
            self._lapsed_at = now
            self._last_beat = now  # one lapse per gap; batches started from now on hold the new epoch

    def beat(self) -> None:
        """A heartbeat of ours reached the broker."""
        with self._lock:
            now = self._mono()
            self._check(now)
            self._last_beat = now

    def epoch(self) -> int:
        """The current lease epoch (a batch starting now holds it)."""
        with self._lock:
            self._check(self._mono())
            return self._epoch

    def holds(self, epoch: int) -> bool:
        """True while no heartbeat gap has lapsed the lease since ``epoch`` was taken."""
        return self.epoch() == epoch

    def fence(self, taken: int | None = None) -> Callable[[], bool]:
        """A fence for one batch (see ``fetchers.engine.Engine.run_batch``). ``taken``: the epoch the batch
        was accepted in (its message addressed to it, ``runtime.FetchRuntime.run_batch``), so a batch
        accepted before a lapse is fenced however late it starts. Without one (a batch addressed to no
        epoch) the epoch is taken now, and a batch that starts within ``quarantine_s`` of a lapse is fenced
        from the start: it most likely waited in our prefetch while we were away, and may have been
        re-issued since (its URLs go back unfetched)."""
        if taken is not None:
            accepted = taken
            return lambda: self.holds(accepted)
        taken = self.epoch()
        with self._lock:
            if self._mono() - self._lapsed_at < self.quarantine_s:
                return lambda: False
        return lambda: self.holds(taken)
