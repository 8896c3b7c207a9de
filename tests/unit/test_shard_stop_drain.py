"""A dispatcher shard's stop signal (``FleetDispatcher.stop``): it issues nothing more, moves no host, takes
no dead peer over, and waits for its batches out, for at most ``dispatch.lease_s``, before it leaves its
lease; a second signal leaves at once. One dispatcher (no shard) stops at once, as before. The broker and
the store are never touched: the dispatcher is built, not run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pipeline.settings import Settings
from pipeline.transport.dispatcher.service import FleetDispatcher


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def dispatcher(tmp_path: Path, clock: Clock, *, shard: bool) -> Any:
    d: Any = FleetDispatcher(Settings(), out_dir=tmp_path, monotonic=clock)
    if shard:
        d.shard = SimpleNamespace(stopping=False)
    d._issued = {7: object()}  # one batch out
    return d


def test_a_stopping_shard_waits_for_its_batches_out_up_to_the_batch_lease(tmp_path: Path) -> None:
    clock = Clock()
    d = dispatcher(tmp_path, clock, shard=True)
    assert not d._draining()
    d.stop()
    assert d._stopping and d.shard.stopping and d._draining()
    clock.t += d.settings.dispatch.lease_s - 1
    assert d._draining()
    d._issued.clear()  # every batch answered: it leaves
    assert not d._draining()
    d._issued[8] = object()
    clock.t += 2  # past the lease: it leaves what is still out to the serial check and its successor
    assert not d._draining()


def test_a_second_signal_leaves_at_once_and_one_dispatcher_never_drains(tmp_path: Path) -> None:
    d = dispatcher(tmp_path, Clock(), shard=True)
    d.stop()
    assert d._draining()
    d.stop()
    assert not d._draining()
    single = dispatcher(tmp_path, Clock(), shard=False)
    single.stop()
    assert single._stopping and not single._draining()
