"""A crawl directory remembers its settings; a resume takes them, and says which ones it overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.crawl import remember
from pipeline.settings import Settings, SettingsError, load_settings_traced


def _crawl_settings() -> Settings:
    return Settings().with_overrides({
        "dns": {"servers": ("127.0.0.1:5300",)}, "security": {"allow_networks": ("127.0.10.0/24",)},
        "scope": {"max_pages": 500, "max_depth": 4}, "politeness": {"min_host_delay_s": 0.02},
        "fleet": {"broker_url": "amqp://user:secret@broker//"},
    })  # fmt: skip


def test_saved_settings_come_back_as_the_resume_layer(tmp_path: Path) -> None:
    remember.save(tmp_path, _crawl_settings(), ["http://b.test/", "http://a.test/"], clock=lambda: 7.0)
    memory = remember.load(tmp_path)
    assert memory is not None and memory.seeds == ["http://a.test/", "http://b.test/"] and memory.saved_at == 7.0
    loaded = load_settings_traced(environ={}, remembered=memory.settings)
    assert loaded.settings.dns == _crawl_settings().dns
    assert loaded.settings.security == _crawl_settings().security
    assert loaded.settings.scope == _crawl_settings().scope
    assert loaded.sources["dns.servers"] == "crawl-dir"
    assert remember.overrides(memory.settings, loaded) == []


def test_the_broker_url_is_not_written_down(tmp_path: Path) -> None:
    remember.save(tmp_path, _crawl_settings(), [])
    text = (tmp_path / remember.FILE).read_text()
    assert "secret" not in text and "fleet" not in json.loads(text)["settings"]


def test_a_flag_at_resume_overrides_and_each_override_is_one_line(tmp_path: Path) -> None:
    remember.save(tmp_path, _crawl_settings(), [])
    memory = remember.load(tmp_path)
    assert memory is not None
    loaded = load_settings_traced(
        environ={"CRAWLFLEET_SCOPE_MAX_DEPTH": "4"},  # the same value: no override to report
        overrides={"dns": {"servers": ("127.0.0.1:5301",)}, "scope": {"max_pages": 900}},
        remembered=memory.settings,
    )
    lines = [o.line() for o in remember.overrides(memory.settings, loaded)]
    assert loaded.settings.dns.servers == ("127.0.0.1:5301",) and loaded.settings.scope.max_pages == 900
    assert sorted(lines) == [
        'resume: dns.servers = ["127.0.0.1:5301"] (flag) overrides the crawl\'s remembered ["127.0.0.1:5300"]',
        'resume: scope.max_pages = 900 (flag) overrides the crawl\'s remembered 500',
    ]


def test_no_file_is_no_memory_and_a_broken_one_is_named(tmp_path: Path) -> None:
    assert remember.load(tmp_path) is None
    (tmp_path / remember.FILE).write_text("{not json")
    with pytest.raises(SettingsError, match=remember.FILE):
        remember.load(tmp_path)


def test_a_field_this_version_does_not_know_is_left_out(tmp_path: Path) -> None:
    body = {"version": 1, "seeds": [], "settings": {"fetch": {"concurrency": 3, "gone_field": 1}, "gone": {}}}
    (tmp_path / remember.FILE).write_text(json.dumps(body))
    memory = remember.load(tmp_path)
    assert memory is not None and memory.settings == {"fetch": {"concurrency": 3}}


def test_the_write_is_atomic_no_temporary_file_left(tmp_path: Path) -> None:
    remember.save(tmp_path, Settings(), ["http://a.test/"])
    remember.save(tmp_path, _crawl_settings(), ["http://a.test/"])
    assert [p.name for p in tmp_path.iterdir()] == [remember.FILE]
