"""The frontier's stall report (pipeline/frontier/stall.py): pending URLs a frontier offers none of, with
nothing out, described host by host; quiet while batches are out or politeness holds every host."""

from __future__ import annotations

from pipeline.frontier.frontier import Frontier
from pipeline.frontier.limits import FrontierLimits
from pipeline.frontier.stall import StallWatch
from tests.unit.test_frontier import urls


def test_a_frontier_that_offers_nothing_it_counts_is_reported_once_per_period() -> None:
    f = Frontier(FrontierLimits())
    f.add_pending("s.test", 3)  # counted, its window waits for a refill that never comes
    watch = StallWatch(after_s=20.0)
    assert watch.check(f, now=0.0, out=False) is None
    assert watch.check(f, now=10.0, out=False) is None
    report = watch.check(f, now=21.0, out=False)
    assert report is not None and "3 URLs pending (hosts hold 3)" in report
    assert "s.test pending=3 window=0 flags=A" in report
    assert watch.check(f, now=30.0, out=False) is None  # once per period
    assert watch.check(f, now=42.0, out=False) is not None


def test_no_report_while_batches_are_out_or_politeness_holds_every_host() -> None:
    f = Frontier(FrontierLimits())
    f.add(urls("p.test", 2))
    watch = StallWatch(after_s=5.0)
    assert watch.check(f, now=0.0, out=True) is None
    assert watch.check(f, now=10.0, out=True) is None  # a batch out: the clock starts again
    f.hold("p.test", 100.0)
    assert watch.check(f, now=11.0, out=False) is None
    assert watch.check(f, now=20.0, out=False) is None  # a long crawl delay: nothing is wrong
    assert watch.check(f, now=101.0, out=False) is not None
