"""The crawl's DNS preflight: a resolver that answers nothing is waited for (bounded), a wrong answer
is refused at once. ``probe`` is the I/O seam; the clock and sleep are injected."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.crawl.dnsguard import Probe
from pipeline.embedded import preflight
from pipeline.settings import Settings


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _probes(*answers: list[Probe]) -> Any:
    seq = list(answers)

    async def fake(_settings: Settings, _hosts: Any) -> list[Probe]:
        return seq.pop(0) if len(seq) > 1 else seq[0]

    return fake


def test_a_silent_resolver_is_waited_for_and_the_crawl_starts_when_it_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    silent = [Probe("a.test", "timeout"), Probe("b.test", "timeout")]
    monkeypatch.setattr(preflight, "probe", _probes(silent, silent, [Probe("a.test"), Probe("b.test", "timeout")]))
    assert preflight.check(Settings(), ["a.test", "b.test"], wait_s=30, clock=clock, sleep=clock.sleep) is None
    assert 0 < clock.t < 30


def test_a_resolver_silent_past_the_wait_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(preflight, "probe", _probes([Probe("a.test", "timeout")]))
    problem = preflight.check(Settings(), ["a.test"], wait_s=10, clock=clock, sleep=clock.sleep)
    assert problem is not None and "a.test" in problem and clock.t >= 10


def test_a_wrong_answer_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(preflight, "probe", _probes([Probe("a.test", "nxdomain"), Probe("b.test", "timeout")]))
    assert preflight.check(Settings(), ["a.test", "b.test"], wait_s=30, clock=clock, sleep=clock.sleep) is not None
    assert clock.t == 0
