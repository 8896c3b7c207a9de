"""S1/S3 building blocks: seconds, admission, S1's u, sizing, quotas, liveness, serial ids."""

from __future__ import annotations

import math

import pytest

from pipeline.dispatch.admission import Admission, capacity, minute_of, second_of_minute
from pipeline.dispatch.liveness import Liveness
from pipeline.dispatch.quotas import QuotaError, Quotas
from pipeline.dispatch.serials import MemorySerialStore, SerialAllocator, SerialError
from pipeline.dispatch.sizing import AverageTracker, PageTimeHistory, batch_size

T0 = 1_700_000_040.0  # int(T0) % 60 == 0, so T0 is second 1 of a minute


def test_second_of_minute_edges() -> None:
    assert second_of_minute(T0) == 1
    assert second_of_minute(T0 + 0.999) == 1
    assert second_of_minute(T0 + 59) == 60
    assert second_of_minute(T0 + 59.999) == 60
    assert second_of_minute(T0 + 60) == 1
    assert minute_of(T0 + 59.9) == minute_of(T0)
    assert minute_of(T0 + 60) == minute_of(T0) + 1


def test_budget_carries_over_within_minute_only() -> None:
    a = Admission(Quotas({"x": 10}))
    assert a.budget("x", T0) == 10  # s = 1
    assert a.budget("x", T0 + 59) == 600  # s = 60: unused seconds carried over
    a.grant("x", "f", 600, T0 + 59)
    assert a.budget("x", T0 + 59.5) == 0
    assert a.budget("x", T0 + 60) == 10  # next minute, s = 1: reset, no carry-over across minutes


def test_admission_rule_t_plus_n_le_sm() -> None:
    a = Admission(Quotas({"x": 10}))
    a.grant("x", "f", 15, T0 + 1)  # s = 2, budget was 20
    assert a.budget("x", T0 + 1) == 5
    assert a.admitted(64, 5) == 0  # S1: t + n > s*m is a no, not a smaller batch
    assert a.admitted(5, 5) == 5  # t + n == s*m: yes
    assert a.admitted(3, 5) == 3
    assert a.admitted(64, 0) == 0
    assert Admission(Quotas({"x": 10}), shrink=True).admitted(64, 5) == 5  # the explicit deviation
    assert Admission(Quotas({"x": 10}), shrink=True).admitted(64, 0.5) == 0


def test_reset_once_per_minute_not_every_call_in_second_1() -> None:
    a = Admission(Quotas({"x": 10}))
    assert a.budget("x", T0) == 10
    a.grant("x", "f", 10, T0 + 0.1)
    assert a.budget("x", T0 + 0.9) == 0  # still second 1: no second reset
    assert a.r("f") == 10


def test_reset_when_second_1_is_skipped() -> None:
    a = Admission(Quotas({"x": 10}))
    a.grant("x", "f", 300, T0 + 29)
    assert a.budget("x", T0 + 65) == 60  # second 6 of the next minute; second 1 never observed
    assert a.r("f") == 0
    a.grant("x", "f", 1, T0 + 65)
    assert a.budget("x", T0 + 60 * 7 + 2) == 30  # minutes skipped entirely


def test_clock_going_backwards_does_not_reset() -> None:
    a = Admission(Quotas({"x": 10}))
    a.grant("x", "f", 600, T0 + 60 + 59)
    assert not a.roll(T0 + 59)
    assert a.n("x") == 600


def test_quota_zero_and_unknown_and_unlimited() -> None:
    a = Admission(Quotas({"zero": 0}))
    assert a.budget("zero", T0 + 59) == 0
    assert a.budget("nope", T0) is None
    u = Admission(Quotas.unlimited())
    assert u.budget("anything", T0) == math.inf
    assert u.admitted(64, math.inf) == 64


def test_fractional_quota() -> None:
    a = Admission(Quotas({"x": 0.5}))
    assert a.budget("x", T0) == 0  # floor(1 * 0.5)
    assert a.budget("x", T0 + 1) == 1  # s = 2


def test_capacity_is_s1s_u() -> None:
    assert capacity(p=10, q=5, r=3, s=2) == 22  # u = p*s + q - r (the node choice: test_nodechoice_rule.py)


def test_batch_size_formula_n0_and_clamp() -> None:
    assert batch_size(k=64, t_i=None, avg=None, n_min=8, n_max=512) == 64  # n(0) = k
    assert batch_size(k=64, t_i=None, avg=0.5, n_min=8, n_max=512) == 64
    assert batch_size(k=64, t_i=0.25, avg=0.5, n_min=8, n_max=512) == 128  # twice as fast
    assert batch_size(k=64, t_i=1.0, avg=0.5, n_min=8, n_max=512) == 32
    assert batch_size(k=64, t_i=0.001, avg=1.0, n_min=8, n_max=512) == 512  # clamp high
    assert batch_size(k=64, t_i=100.0, avg=1.0, n_min=8, n_max=512) == 8  # clamp low
    assert batch_size(k=4, t_i=None, avg=None, n_min=8, n_max=512) == 8  # k itself is clamped
    with pytest.raises(ValueError):
        batch_size(k=64, t_i=None, avg=None, n_min=10, n_max=5)


def test_running_average_window() -> None:
    h = PageTimeHistory(3)
    assert h.mean is None
    for v in (1.0, 2.0, 3.0):
        h.add(v)
    assert h.mean == pytest.approx(2.0)
    h.add(10.0)  # 1.0 falls out of the window
    assert h.mean == pytest.approx(5.0) and len(h) == 3
    with pytest.raises(ValueError):
        h.add(0.0)
    with pytest.raises(ValueError):
        h.add(float("nan"))


def test_one_slow_round_moves_t_by_at_most_one_window_share() -> None:
    h = PageTimeHistory(16)
    for _ in range(16):
        h.add(1.0)
    h.add(5.0)
    assert h.mean == pytest.approx(1.25)


def test_average_tracker() -> None:
    tr = AverageTracker()
    assert tr.avg is None
    tr.set("a", 1.0)
    tr.set("b", 3.0)
    assert tr.avg == pytest.approx(2.0)
    tr.set("a", 2.0)
    assert tr.avg == pytest.approx(2.5)
    tr.remove("b")
    tr.remove("zz")
    assert tr.avg == pytest.approx(2.0) and "a" in tr and "b" not in tr


def test_quotas_load(tmp_path) -> None:
    path = tmp_path / "quotas.toml"
    path.write_text('[services]\ndefault = 200\nnews = 12.5\npaused = 0\n')
    q = Quotas.load(path)
    assert q.quota("default") == 200 and q.quota("news") == 12.5 and q.quota("paused") == 0
    assert q.quota("other") is None and q.services() == ["default", "news", "paused"]
    assert Quotas.from_settings_file("").quota("x") == math.inf
    assert Quotas.from_settings_file(str(path)).quota("news") == 12.5


@pytest.mark.parametrize(
    "text",
    ['[services]\nx = -1\n', '[services]\nx = "fast"\n', 'x = 1\n', '[services]\nx = true\n',
     '[services]\nx = inf\n', "[services\n"],
)
def test_quotas_reject_bad_files(tmp_path, text: str) -> None:
    path = tmp_path / "q.toml"
    path.write_text(text)
    with pytest.raises(QuotaError):
        Quotas.load(path)


def test_example_quota_file_loads() -> None:
    from pathlib import Path

    q = Quotas.load(Path(__file__).resolve().parents[2] / "quotas.example.toml")
    assert q.services()


def test_liveness_two_missed_periods() -> None:
    lv = Liveness(2.0, 2)
    assert not lv.is_live("a", 0.0)
    assert lv.revive("a", 10.0)  # new
    assert lv.is_live("a", 13.999)
    assert not lv.is_live("a", 14.0)  # silent for exactly 2 periods: excluded
    assert lv.sweep(13.9) == []
    assert lv.sweep(14.0) == ["a"] and lv.is_dead("a")
    assert lv.sweep(20.0) == []  # declared once
    lv.touch("a", 20.0)  # a completion does not revive
    assert not lv.is_live("a", 20.0)
    assert lv.revive("a", 21.0)  # a heartbeat does
    assert lv.is_live("a", 21.0) and not lv.revive("a", 21.5)


def test_serials_strictly_increasing_in_blocks_and_across_restart() -> None:
    store = MemorySerialStore()
    a = SerialAllocator(store.reserve_serials, block=4)
    ids = [a.next() for _ in range(10)]
    assert ids == list(range(1, 11)) and store.calls == 3
    b = SerialAllocator(store.reserve_serials, block=4)  # restart: the unused tail 11, 12 is skipped
    assert b.next() == 13 and b.first == 13 and b.last == 13


def test_serials_reject_a_reserve_that_goes_backwards() -> None:
    blocks = iter([range(1, 3), range(2, 4)])
    a = SerialAllocator(lambda n: next(blocks), block=2)
    a.next(), a.next()
    with pytest.raises(SerialError):
        a.next()


def test_quota_wait_hint() -> None:
    a = Admission(Quotas({"x": 10, "zero": 0, "tiny": 5e-324}))
    assert a.wait_s("x", T0 + 0.5) == 0.0
    a.grant("x", "f", 10, T0 + 0.5)
    assert a.wait_s("x", T0 + 0.5) == pytest.approx(0.5)  # 11 fits at second 2
    assert a.wait_s("zero", T0 + 10.25) == pytest.approx(49.75)  # never this minute: next minute
    assert a.wait_s("tiny", T0) == pytest.approx(60.0)
