"""fetch.event_loop (fetchers/loops.py): the loop a crawl runs on is the one the setting names."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from fetchers import loops
from pipeline.settings import SettingsError, load_settings


async def _kind() -> tuple[str, type]:
    await asyncio.sleep(0)
    return loops.running_kind(), type(asyncio.get_running_loop())


def test_each_choice_runs_on_its_loop() -> None:
    kind, cls = loops.run(_kind(), "uvloop")
    assert kind == "uvloop" and issubclass(cls, uvloop.Loop)
    kind, cls = loops.run(_kind(), "asyncio")
    assert kind == "asyncio" and not issubclass(cls, uvloop.Loop)
    assert loops.run(_kind(), "auto")[0] == "uvloop"  # uvloop is a dependency: auto finds it


def test_a_fleet_node_loop_is_made_by_the_same_factory() -> None:
    loop = loops.loop_factory("uvloop")()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_the_setting_is_checked() -> None:
    assert load_settings(environ={"CRAWLFLEET_FETCH_EVENT_LOOP": "uvloop"}).fetch.event_loop == "uvloop"
    assert load_settings(environ={}).fetch.event_loop == "auto"
    with pytest.raises(SettingsError, match="fetch.event_loop"):
        load_settings(environ={"CRAWLFLEET_FETCH_EVENT_LOOP": "tokio"})
    with pytest.raises(ValueError, match="tokio"):
        loops.loop_factory("tokio")
