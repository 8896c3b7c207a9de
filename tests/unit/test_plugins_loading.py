"""Plugins from specs and entry points (pipeline/plugins/loading.py): each mistake is one line naming it."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.plugins.loading import GROUP, PluginError, job_specs, load
from pipeline.settings import Settings

PLUGIN_SRC = '''
from crawlfleet import Item

class Good:
    url_pattern = r"/p/"
    def extract(self, page):
        yield Item("x", {"u": page.url})

class Raises:
    def __init__(self):
        raise RuntimeError("no config")

class Nothing:
    pass

class BadPattern:
    url_pattern = "(("
    def extract(self, page):
        return []

good = Good()
'''


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Iterator[Path]:
    """A module ``cfplugs`` and an installed distribution with entry points (a .dist-info on sys.path)."""
    (tmp_path / "cfplugs.py").write_text(PLUGIN_SRC)
    (tmp_path / "brokenplug.py").write_text("raise ImportError('half installed')\n")
    info = tmp_path / "cfplugs-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cfplugs\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\ngood = cfplugs:Good\nbroken = brokenplug:X\n")
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in ("cfplugs", "brokenplug"):
        sys.modules.pop(name, None)


def _settings(*specs: str, entry_points: bool = False) -> Settings:
    s = Settings()
    return dataclasses.replace(s, plugins=dataclasses.replace(s.plugins, enabled=specs, entry_points=entry_points))


def test_no_plugins_is_none() -> None:
    assert load(Settings()) is None


def test_a_class_an_object_and_an_entry_point_load(plugin_dir: Path) -> None:
    plugins = load(_settings("cfplugs:Good", "cfplugs:good", "good"))
    assert plugins is not None and [e.name for e in plugins.extractors] == ["Good", "Good", "Good"]
    assert plugins.extractors[0].url_pattern is not None


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nosuchmodule:X", "plugin 'nosuchmodule:X': cannot import nosuchmodule (ModuleNotFoundError"),
        ("cfplugs:Missing", "plugin 'cfplugs:Missing': cfplugs has no attribute 'Missing'"),
        ("cfplugs:Raises", "plugin 'cfplugs:Raises': Raises() raised RuntimeError: no config"),
        ("cfplugs:Nothing", "Nothing has none of extract(page), filter_url(url, source), process_item(item, page)"),
        ("cfplugs:BadPattern", "url_pattern '((' is not a regular expression"),
        ("not a spec", "expected package.module:Name or an entry point name"),
        ("cfplugs:", "expected package.module:Name or an entry point name"),
        ("nosuch", "no entry point 'nosuch' in group crawlfleet.plugins (installed: broken, good)"),
        ("broken", "entry point broken = brokenplug:X cannot be loaded (ImportError: half installed)"),
    ],
)
def test_each_mistake_is_one_line_naming_it(plugin_dir: Path, spec: str, says: str) -> None:
    with pytest.raises(PluginError) as err:
        load(_settings(spec))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_entry_point_group_loads_every_plugin_and_names_a_broken_one(plugin_dir: Path) -> None:
    with pytest.raises(PluginError, match="entry point broken"):
        load(_settings(entry_points=True))


def test_job_specs_resolve_entry_points_to_what_they_point_at(plugin_dir: Path) -> None:
    assert job_specs(_settings("good", "cfplugs:good")) == ["cfplugs:Good", "cfplugs:good"]
