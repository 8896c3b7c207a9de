"""docs/crawlfleet.example.toml names every setting, each with a comment, and loads to the defaults."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pipeline.settings import Settings, field_keys, load_settings_traced

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "crawlfleet.example.toml"


def test_the_example_lists_every_setting_and_nothing_else() -> None:
    data = tomllib.loads(EXAMPLE.read_text())
    listed = [f"{section}.{name}" for section, values in data.items() for name in values]
    assert sorted(listed) == sorted(field_keys())


def test_every_setting_in_the_example_has_a_comment_above_it() -> None:
    lines = EXAMPLE.read_text().splitlines()
    bare = [
        line.split("=")[0].strip()
        for i, line in enumerate(lines)
        if "=" in line and not line.startswith("#") and not lines[i - 1].startswith("#")
    ]
    assert bare == []


def test_the_example_loads_cleanly_to_the_defaults() -> None:
    loaded = load_settings_traced(EXAMPLE, environ={})
    assert loaded.settings == Settings()
    assert set(loaded.sources.values()) == {f"file:{EXAMPLE}"}
