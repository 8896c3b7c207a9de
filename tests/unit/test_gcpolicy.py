"""pipeline.crawl.gcpolicy: what tune_for_crawl leaves behind (restored afterwards: pytest's process is shared)."""

from __future__ import annotations

import gc

from pipeline.crawl import gcpolicy


def test_tune_freezes_the_start_up_heap_and_raises_the_thresholds() -> None:
    before = gc.get_threshold()
    try:
        gcpolicy.tune_for_crawl()
        assert gc.get_threshold() == (gcpolicy.GEN0_THRESHOLD, gcpolicy.GEN1_THRESHOLD, gcpolicy.GEN2_THRESHOLD)
        assert gc.get_freeze_count() > 1000  # the modules and the public-suffix trie, at least
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # objects made after the freeze are still collected
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
