"""tests/services.py: a missing service skips a test on a developer's box and fails it in CI, with one
line naming what is missing."""

from __future__ import annotations

import pytest

from tests.services import need


def test_missing_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="^unbound is missing: run scripts/svc-unbound.sh install$"):
        need(False, "unbound", "run scripts/svc-unbound.sh install")


@pytest.mark.parametrize("value", ["true", "1", "yes", "TRUE"])
def test_missing_fails_in_ci_with_one_line(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception) as info:
        need(False, "java", "run scripts/svc-hbase.sh install")
    assert str(info.value) == "CI=true and java is missing: run scripts/svc-hbase.sh install"
    assert "\n" not in str(info.value) and info.value.pytrace is False


def test_present_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    need(True, "java")
