"""When a link round opens (pipeline/transport/links/gather.py): at once, or after gathering while fed."""

from __future__ import annotations

from pipeline.storage.segments import SegmentInfo
from pipeline.transport.links.gather import FED_CHECK_S, RoundGather


def segs(*ages: float, now: float = 100.0) -> list[SegmentInfo]:
    return [SegmentInfo(f"n1/s{i}.jsonl", 10, now - age) for i, age in enumerate(ages)]


def fed_gather(**kw: float) -> RoundGather:
    """Two rounds of 1,000 pages each reported 10 s apart, the last taking 1 s: 200 pages/s."""
    g = RoundGather(gather_s=kw.get("gather_s", 3.0), max_segments=int(kw.get("max_segments", 4)))
    g.reported(90.0, 1000, 1.0)
    g.reported(100.0, 1000, 1.0)
    return g


def test_off_and_without_recent_rounds_every_round_opens_at_once() -> None:
    assert not RoundGather(gather_s=0.0).wait(segs(0.1), 100.0, lambda: 10**9)
    g = RoundGather(gather_s=3.0)
    assert not g.wait(segs(0.1), 100.0, lambda: 10**9)  # no rate known yet: the crawl's start
    g.reported(99.0, 500, 1.0)
    assert not g.wait(segs(0.1), 100.0, lambda: 10**9)  # one round is no rate either


def test_a_fed_crawl_gathers_until_the_oldest_segment_has_waited() -> None:
    g = fed_gather()
    assert g.need(100.0) == 2.0 * 200.0 * (3.0 + 1.0)  # 1,600 pending URLs cover the wait and a round
    assert g.wait(segs(1.0, 0.5), 100.0, lambda: 5000)
    assert not g.wait(segs(3.0, 0.5), 100.0, lambda: 5000)  # the oldest has waited gather_s
    assert not g.wait(segs(1, 1, 1, 1), 100.0, lambda: 5000)  # max_segments wait: a full round


def test_a_crawl_running_short_gets_its_round_at_once() -> None:
    assert not fed_gather().wait(segs(0.2), 100.0, lambda: 1599)


def test_the_pending_count_is_read_at_most_every_half_second() -> None:
    g, reads = fed_gather(), []

    def pending() -> int:
        reads.append(1)
        return 5000

    assert g.wait(segs(0.1), 100.0, pending) and g.wait(segs(0.2), 100.0 + FED_CHECK_S / 2, pending)
    assert len(reads) == 1
    assert g.wait(segs(0.3), 100.0 + FED_CHECK_S, pending) and len(reads) == 2


def test_old_rounds_leave_the_rate() -> None:
    g = fed_gather()
    assert g.need(200.0) is None  # both rounds left the window: no rate, no gathering
    assert not g.wait(segs(0.1), 200.0, lambda: 10**9)
